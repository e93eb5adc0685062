// The built-in byte tokenizer (docs/file-formats.md#the-byte-tokenizer): ids 0–255 are the bytes of the
// UTF-8 text, 256 = <bos>, 257 = <eos>, 258 = <pad>.
#pragma once

#include "ptrain/sdk/chat.h"
#include "ptrain/sdk/tokenizer.h"

#include <optional>

namespace ptrain::tokenizer {

class ByteTokenizer final : public sdk::Tokenizer {
 public:
  static constexpr int64_t kBos = 256;
  static constexpr int64_t kEos = 257;
  static constexpr int64_t kPad = 258;
  static constexpr int64_t kVocabSize = 259;

  std::vector<int64_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t bos_id() const override { return kBos; }
  int64_t eos_id() const override { return kEos; }
  int64_t pad_id() const override { return kPad; }
  int64_t vocab_size() const override { return kVocabSize; }
  std::string fingerprint() const override { return "bytes:1"; }
  const sdk::ChatTemplate* chat_template() const override { return chat_template_ ? &*chat_template_ : nullptr; }

  void set_chat_template(std::optional<sdk::ChatTemplate> chat_template) { chat_template_ = std::move(chat_template); }

 private:
  std::optional<sdk::ChatTemplate> chat_template_;
};

}  // namespace ptrain::tokenizer
