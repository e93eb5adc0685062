// A Hugging Face sequence-classification model used as a reward model
// (LlamaForSequenceClassification, Qwen2/Qwen3/MistralForSequenceClassification):
// the decoder of causal_lm.h with a linear `score` head instead of lm_head,
// read at one position of each sequence:
//
//   score(ids) = W · h[last],  W = score.weight [num_labels = 1, hidden], no bias
//
// h = the decoder's final hidden states (after the final norm) and `last` the
// last position whose id is not config.json's pad_token_id (transformers'
// rule: the rightmost non-pad token; position 0 when every id is a pad, the
// last position when the config has no pad_token_id). Only num_labels = 1
// (one scalar reward) is supported.
#pragma once

#include "core/model/causal_lm.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

namespace ptrain::model {

class SequenceClassifier {
 public:
  // Reads config.json (architectures ending in ForSequenceClassification,
  // num_labels or id2label giving one label, pad_token_id) and the weights:
  // the decoder's tensors and score.weight [1, hidden_size], nothing else.
  // Weights move to `device` in their stored dtype, are widened there and
  // take no gradients; matrix products read `compute_dtype`. Throws
  // sdk::ModelError naming the file and the key or tensor.
  static std::unique_ptr<SequenceClassifier> load_hf_dir(const std::filesystem::path& dir, at::Device device,
                                                         at::ScalarType compute_dtype);

  // One score per sequence of token ids (unpadded, each non-empty), from one
  // forward pass of the whole batch without gradients: the sequences are
  // right-padded to the longest, which causal attention keeps from changing
  // the real tokens' hidden states. → [B] float32 on the host.
  at::Tensor scores(const std::vector<std::vector<int64_t>>& sequences);

  const ModelConfig& config() const { return decoder_->config(); }
  CausalLm& decoder() { return *decoder_; }
  int64_t pad_token_id() const { return pad_token_id_; }  // -1: config.json has none
  at::ScalarType stored_dtype() const { return decoder_->stored_dtype(); }

 private:
  SequenceClassifier(std::unique_ptr<CausalLm> decoder, at::Tensor score_weight, int64_t pad_token_id);
  // The position `scores` reads in a sequence: transformers' last non-pad token.
  int64_t scored_position(const std::vector<int64_t>& ids) const;

  std::unique_ptr<CausalLm> decoder_;  // its lm_head is never used (load_hf_decoder without one)
  at::Tensor score_weight_;            // [1, H] float32, on the decoder's device
  int64_t pad_token_id_ = -1;
};

}  // namespace ptrain::model
