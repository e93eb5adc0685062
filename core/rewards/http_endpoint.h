// Where an HTTP reward server listens, from the URL a user writes in
// reward_funcs: http://host[:port][/path][?query][#timeout_s=S&retries=N].
// The fragment (never sent to the server) carries the client's settings.
#pragma once

#include <cstdint>
#include <string>

namespace ptrain::rewards {

struct HttpEndpoint {
  std::string url;  // as written, fragment included
  std::string host;
  uint16_t port = 80;
  std::string target;       // path and query, "/" when the URL has none
  double timeout_s = 30.0;  // for one attempt: connect, send, answer
  int64_t retries = 2;      // further attempts after a failed one (no answer, timeout, 5xx)
};

// Throws sdk::ConfigError naming the URL and what is wrong with it (not
// http://, https, no host, a bad port, an unknown or bad setting).
HttpEndpoint parse_http_endpoint(const std::string& url);

}  // namespace ptrain::rewards
