#include "core/tokenizer/decode_table.h"

#include "core/tokenizer/utf8.h"

namespace ptrain::tokenizer::detail {

void DecodeTable::set(int64_t id, std::string bytes, bool special) {
  const auto index = static_cast<size_t>(id);
  if (index >= bytes_.size()) {
    bytes_.resize(index + 1);
    special_.resize(index + 1, 0);
  }
  bytes_[index] = std::move(bytes);
  special_[index] = special ? 1 : 0;
}

std::string DecodeTable::decode(const std::vector<int64_t>& ids) const {
  std::string bytes;
  for (const int64_t id : ids) {
    if (id < 0 || id >= size()) continue;
    if (special_[static_cast<size_t>(id)]) continue;
    bytes += bytes_[static_cast<size_t>(id)];
  }
  return lossy_utf8(bytes);
}

std::vector<std::string> DecodeTable::tokens(const std::vector<int64_t>& ids) const {
  std::vector<std::string> out;
  out.reserve(ids.size());
  for (const int64_t id : ids) {
    if (id < 0 || id >= size() || special_[static_cast<size_t>(id)]) continue;
    out.push_back(bytes_[static_cast<size_t>(id)]);
  }
  return out;
}

}  // namespace ptrain::tokenizer::detail
