// ASCII lower case, for matching config spellings without regard to case.
#pragma once

#include <cctype>
#include <string>

namespace ptrain::config {

inline std::string ascii_lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

}  // namespace ptrain::config
