#include "core/io/read_file.h"

#include <fstream>
#include <sstream>

namespace ptrain::io {

std::optional<std::string> try_read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace ptrain::io
