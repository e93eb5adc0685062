// HfTokenizer's parts, shared by hf_tokenizer.cpp (encoding, decoding) and
// hf_tokenizer_load.cpp (reading the files). Not a public header.
#pragma once

#include "core/tokenizer/added_tokens.h"
#include "core/tokenizer/decode_table.h"
#include "core/tokenizer/decoder.h"
#include "core/tokenizer/hf_tokenizer.h"
#include "core/tokenizer/normalizer.h"
#include "core/tokenizer/pre_tokenizer.h"
#include "core/tokenizer/tokenizer_config.h"
#include "core/tokenizer/tokenizer_model.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ptrain::tokenizer {

// A stretch of input text between raw added tokens, normalized. It is
// normalized piece by piece, so chunk i starts at byte chunk_starts[i] of
// `text` and comes from input piece chunk_piece[i].
struct NormalizedSection {
  std::string text;
  std::vector<size_t> chunk_starts;
  std::vector<size_t> chunk_piece;
  bool at_input_start = false;  // the section begins the input (Metaspace's prepend_scheme "first")
};

struct HfTokenizer::Impl {
  std::string fingerprint;
  detail::Normalizer normalizer;
  detail::PreTokenizer pre_tokenizer;
  std::unique_ptr<detail::Model> model;
  detail::AddedTokens added_tokens;
  detail::DecodeTable decode_table;
  detail::Decoder decoder;
  detail::TokenizerConfig config;
  std::string config_path;  // tokenizer_config.json beside the file, for errors
  std::optional<sdk::ChatTemplate> chat_template;

  // Appends the ids of `text` to `ids`. With `piece_starts` (the offset of
  // each input piece in `text`), also appends to `pieces_of_id` the pieces
  // each id's bytes came from.
  void encode_text(std::string_view text, const std::vector<size_t>* piece_starts, std::vector<int64_t>& ids,
                   std::vector<sdk::PieceRange>* pieces_of_id) const;
  void normalize_section(std::string_view text, size_t begin, size_t end, const std::vector<size_t>* piece_starts,
                         NormalizedSection& out) const;
  void encode_normalized_section(const NormalizedSection& section, std::vector<int64_t>& ids,
                                 std::vector<sdk::PieceRange>* pieces_of_id) const;
};

}  // namespace ptrain::tokenizer
