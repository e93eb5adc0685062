// SentencePiece-style BPE (Llama 2, Mistral, Gemma): the vocabulary is written
// as plain UTF-8 text ("▁Hello"), a word starts as one symbol per character,
// and a character outside the vocabulary becomes its UTF-8 bytes as the
// `<0xNN>` tokens when `byte_fallback` is set, else the unknown token
// (consecutive ones fused into one with `fuse_unk`). Adjacent symbols are then
// merged by rank with a priority queue, lowest rank first and leftmost on
// ties, as the `tokenizers` library's Word::merge_all does: O(n log n) in the
// word's length, so a whole document that no pre-tokenizer splits stays fast.
#pragma once

#include "core/tokenizer/tokenizer_model.h"

#include <array>
#include <cstdint>
#include <unordered_map>
#include <utility>

namespace ptrain::tokenizer::detail {

class SentencePieceBpe final : public Model {
 public:
  // `model` is tokenizer.json's "model" with type "BPE"; it needs byte_fallback
  // or an unk_token so that every character can be encoded.
  static std::unique_ptr<SentencePieceBpe> load(const nlohmann::json& model, const JsonSource& file,
                                                DecodeTable& table);

  void encode_word(std::string_view word, std::vector<int64_t>& ids,
                   std::vector<size_t>* ends = nullptr) const override;
  std::optional<int64_t> token_id(const std::string& text) const override;

 private:
  SentencePieceBpe() = default;
  void load_vocab(const nlohmann::json& vocab, const JsonSource& file, DecodeTable& table);
  void load_merges(const nlohmann::json& list, const JsonSource& file);
  void load_unknown(const nlohmann::json& model, const JsonSource& file);
  // The symbols `word` starts as: one per character, or its byte tokens, or
  // unk; `bytes` gets how many bytes of the word each symbol stands for.
  void initial_symbols(std::string_view word, std::vector<int32_t>& ids, std::vector<uint32_t>& bytes) const;
  // Merges the symbols in place, adding up the bytes of merged ones.
  void merge(std::vector<int32_t>& ids, std::vector<uint32_t>& bytes) const;

  std::unordered_map<std::string, int32_t> token_to_id_;
  std::array<int32_t, 256> byte_id_{};  // the id of "<0xNN>", -1 when the vocabulary lacks it
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;  // (left << 32 | right) → (rank, merged id)
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  int32_t unk_id_ = -1;
};

}  // namespace ptrain::tokenizer::detail
