#include "core/config/byte_size.h"

#include "core/config/ascii_lower.h"

#include <cctype>
#include <limits>
#include <utility>

namespace ptrain::config {
namespace {

std::optional<int64_t> unit_bytes(const std::string& unit) {
  static const std::pair<const char*, int64_t> kUnits[] = {{"b", 1},
                                                           {"kb", 1000},
                                                           {"mb", 1000'000},
                                                           {"gb", 1000'000'000},
                                                           {"tb", 1000'000'000'000},
                                                           {"kib", int64_t{1} << 10},
                                                           {"mib", int64_t{1} << 20},
                                                           {"gib", int64_t{1} << 30},
                                                           {"tib", int64_t{1} << 40}};
  for (const auto& [name, bytes] : kUnits) {
    if (unit == name) return bytes;
  }
  return std::nullopt;
}

}  // namespace

std::optional<int64_t> parse_byte_size(const std::string& text) {
  size_t end = 0;
  int64_t count = 0;
  while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) {
    const int digit = text[end] - '0';
    if (count > (std::numeric_limits<int64_t>::max() - digit) / 10) return std::nullopt;
    count = count * 10 + digit;
    ++end;
  }
  if (end == 0 || count == 0) return std::nullopt;
  if (end < text.size() && text[end] == ' ') ++end;
  const std::optional<int64_t> unit = unit_bytes(ascii_lower(text.substr(end)));
  if (!unit || count > std::numeric_limits<int64_t>::max() / *unit) return std::nullopt;
  return count * *unit;
}

}  // namespace ptrain::config
