#include "core/rewards/http_endpoint.h"

#include "ptrain/sdk/errors.h"

#include <cmath>
#include <cstdlib>

namespace ptrain::rewards {
namespace {

[[noreturn]] void refuse(const std::string& url, const std::string& reason) {
  throw sdk::ConfigError("reward server URL '" + url + "': " + reason);
}

// A whole string as a number, or refuse naming the setting.
double number_of(const std::string& url, const std::string& key, const std::string& text) {
  char* end = nullptr;
  const double value = text.empty() ? NAN : std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value)) {
    refuse(url, "setting '" + key + "': expected a number, got '" + text + "'");
  }
  return value;
}

// The fragment's key=value settings, separated by '&'.
void read_settings(const std::string& url, const std::string& fragment, HttpEndpoint& endpoint) {
  size_t begin = 0;
  while (begin <= fragment.size() && !fragment.empty()) {
    const size_t end = std::min(fragment.find('&', begin), fragment.size());
    const std::string setting = fragment.substr(begin, end - begin);
    const size_t equals = setting.find('=');
    const std::string key = setting.substr(0, equals);
    const std::string value = equals == std::string::npos ? "" : setting.substr(equals + 1);
    if (key == "timeout_s") {
      endpoint.timeout_s = number_of(url, key, value);
      if (endpoint.timeout_s <= 0) refuse(url, "setting 'timeout_s': expected > 0, got " + value);
    } else if (key == "retries") {
      const double retries = number_of(url, key, value);
      if (retries < 0 || retries > 100 || retries != std::floor(retries)) {
        refuse(url, "setting 'retries': expected an integer in [0, 100], got " + value);
      }
      endpoint.retries = static_cast<int64_t>(retries);
    } else {
      refuse(url, "unknown setting '" + key + "' after '#'; expected timeout_s=SECONDS and/or retries=COUNT");
    }
    begin = end + 1;
  }
}

}  // namespace

HttpEndpoint parse_http_endpoint(const std::string& url) {
  HttpEndpoint endpoint;
  endpoint.url = url;
  const std::string scheme = "http://";
  if (url.rfind("https://", 0) == 0)
    refuse(url, "https is not supported; serve the reward over http:// (e.g. on localhost)");
  if (url.rfind(scheme, 0) != 0) refuse(url, "expected http://host:port/path");
  const size_t hash = url.find('#');
  const std::string rest =
      url.substr(scheme.size(), hash == std::string::npos ? std::string::npos : hash - scheme.size());
  if (hash != std::string::npos) read_settings(url, url.substr(hash + 1), endpoint);
  const size_t slash = rest.find_first_of("/?");
  const std::string authority = rest.substr(0, slash);
  endpoint.target = slash == std::string::npos ? "/" : rest.substr(slash);
  if (endpoint.target[0] == '?') endpoint.target = "/" + endpoint.target;
  if (authority.find('@') != std::string::npos) refuse(url, "user names in the URL are not supported");
  const size_t colon = authority.rfind(':');
  endpoint.host = authority.substr(0, colon);
  if (endpoint.host.empty()) refuse(url, "no host name");
  if (colon != std::string::npos) {
    const std::string port = authority.substr(colon + 1);
    const bool digits = !port.empty() && port.size() <= 5 && port.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || std::stol(port) < 1 || std::stol(port) > 65535) {
      refuse(url, "port '" + port + "': expected a number from 1 to 65535");
    }
    endpoint.port = static_cast<uint16_t>(std::stol(port));
  }
  if (endpoint.target.find_first_of(" \t\r\n") != std::string::npos) refuse(url, "blanks in the path");
  return endpoint;
}

}  // namespace ptrain::rewards
