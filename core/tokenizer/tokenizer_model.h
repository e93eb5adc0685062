// tokenizer.json's "model": what turns one pre-tokenized word into token ids.
// Two kinds of BPE implement it: byte-level (byte_level_bpe.h), chosen when
// the pre-tokenizer has a ByteLevel step, and SentencePiece-style with
// byte_fallback (sentencepiece_bpe.h) otherwise.
#pragma once

#include "core/tokenizer/decode_table.h"
#include "core/tokenizer/json_source.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ptrain::tokenizer::detail {

class Model {
 public:
  virtual ~Model() = default;

  // Appends the ids of `word`, one span the pre-tokenizer left, to `ids`.
  // With `ends`, also appends for each id the offset in `word` just past its
  // last byte (so the ids cover word[0, ends[0]), word[ends[0], ends[1]), ...).
  virtual void encode_word(std::string_view word, std::vector<int64_t>& ids,
                           std::vector<size_t>* ends = nullptr) const = 0;

  // The id of the vocabulary token whose text (decoded bytes for byte-level
  // BPE) is `text`, if there is one (tokenizer_config.json names special
  // tokens by their text).
  virtual std::optional<int64_t> token_id(const std::string& text) const = 0;
};

// Reads tokenizer.json's "model", byte-level BPE when `byte_level` (the
// pre-tokenizer has a ByteLevel step), else SentencePiece-style. Each
// vocabulary token goes into `table` under its id: its raw bytes for
// byte-level BPE, its text for SentencePiece. Throws naming the key of what is
// unsupported or malformed.
std::unique_ptr<Model> load_model(const nlohmann::json& model, const JsonSource& file, DecodeTable& table,
                                  bool byte_level);

}  // namespace ptrain::tokenizer::detail
