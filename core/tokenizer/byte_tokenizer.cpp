#include "core/tokenizer/byte_tokenizer.h"

namespace ptrain::tokenizer {

std::vector<int64_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size());
  for (const char byte : text) ids.push_back(static_cast<unsigned char>(byte));
  return ids;
}

std::string ByteTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string text;
  text.reserve(ids.size());
  for (const int64_t id : ids) {
    if (id >= 0 && id < 256) text.push_back(static_cast<char>(id));
  }
  return text;
}

}  // namespace ptrain::tokenizer
