// tokenizer.json's "model": what turns one pre-tokenized word into token ids.
// Byte-level BPE (byte_level_bpe.h) is the one kind read today; another kind,
// such as SentencePiece-style BPE with byte_fallback, would be a second
// implementation of Model, chosen in load_model().
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
  virtual void encode_word(std::string_view word, std::vector<int64_t>& ids) const = 0;

  // The id of the vocabulary token whose bytes are `bytes`, if there is one
  // (tokenizer_config.json names special tokens by their text).
  virtual std::optional<int64_t> token_id(const std::string& bytes) const = 0;
};

// Reads tokenizer.json's "model"; each vocabulary token's bytes go into
// `table` under its id. Throws naming the key of what is unsupported or malformed.
std::unique_ptr<Model> load_model(const nlohmann::json& model, const JsonSource& file, DecodeTable& table);

}  // namespace ptrain::tokenizer::detail
