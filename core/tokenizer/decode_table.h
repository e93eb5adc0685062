// What decode() needs to know of each token id: its raw bytes (byte-level
// BPE) or its text (SentencePiece-style; an added token's is its content), and
// whether it is special, so skipped.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ptrain::tokenizer::detail {

// Token ids index dense tables, so an id bounds memory: 2^22 (4.2M) is well
// above the largest vocabularies in use (~256K) and keeps a corrupt or hostile
// id from allocating gigabytes. Loaders check ids against it before set().
constexpr int64_t kMaxTokenIds = int64_t{1} << 22;

class DecodeTable {
 public:
  // Gives `id` (in [0, kMaxTokenIds)) its bytes, replacing what it had; the
  // table grows to hold it.
  void set(int64_t id, std::string bytes, bool special);

  // One more than the largest id set: the vocabulary size.
  int64_t size() const { return static_cast<int64_t>(bytes_.size()); }

  // The bytes of `ids` in order, skipping special and unknown ids, with
  // invalid UTF-8 replaced by U+FFFD.
  std::string decode(const std::vector<int64_t>& ids) const;
  // The token strings of `ids`, skipping special and unknown ids, for a decoder to join.
  std::vector<std::string> tokens(const std::vector<int64_t>& ids) const;

 private:
  std::vector<std::string> bytes_;
  std::vector<uint8_t> special_;
};

}  // namespace ptrain::tokenizer::detail
