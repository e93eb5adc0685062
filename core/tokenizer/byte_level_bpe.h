// Byte-level BPE (GPT-2, Llama 3, Qwen 2/2.5/3, SmolLM): a word's bytes start
// as one token each, then the adjacent pair of lowest merge rank is merged
// until no pair has a rank. With `ignore_merges`, a word that is itself in the
// vocabulary is that one token. The vocabulary is written in GPT-2's
// byte ↔ code point alphabet and held here as raw bytes.
#pragma once

#include "core/tokenizer/tokenizer_model.h"

#include <array>
#include <cstdint>
#include <unordered_map>
#include <utility>

namespace ptrain::tokenizer::detail {

class ByteLevelBpe final : public Model {
 public:
  // `model` is tokenizer.json's "model" with type "BPE" and no byte_fallback.
  static std::unique_ptr<ByteLevelBpe> load(const nlohmann::json& model, const JsonSource& file, DecodeTable& table);

  void encode_word(std::string_view word, std::vector<int64_t>& ids,
                   std::vector<size_t>* ends = nullptr) const override;
  std::optional<int64_t> token_id(const std::string& bytes) const override;

 private:
  ByteLevelBpe();
  void load_vocab(const nlohmann::json& vocab, const JsonSource& file, DecodeTable& table);
  void load_merges(const nlohmann::json& list, const JsonSource& file);
  int32_t find_id(const std::optional<std::string>& bytes) const;  // -1 when absent
  // encode_word without the offsets.
  void append_ids(std::string_view word, std::vector<int64_t>& ids) const;
  // The ids BPE merges `word` into.
  std::vector<int32_t> merge(std::string_view word) const;
  // The rank of merging (left, right), setting `merged` to the result; INT32_MAX if there is no such merge.
  int32_t pair_rank(int32_t left, int32_t right, int32_t& merged) const;

  uint64_t instance_;  // tells this model's entries in the per-thread word cache from another's
  std::unordered_map<std::string, int32_t> bytes_to_id_;
  std::vector<uint32_t> id_bytes_;  // by id: how many bytes the token stands for (0: not in the alphabet)
  std::array<int32_t, 256> byte_id_{};
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;  // (left << 32 | right) → (rank, merged id)
  bool ignore_merges_ = false;
};

}  // namespace ptrain::tokenizer::detail
