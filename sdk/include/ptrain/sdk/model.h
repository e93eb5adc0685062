// The causal language model as plugins see it. The core implements it
// (core/model) for the trained policy and for frozen copies.
#pragma once

#include "ptrain/sdk/batch.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ptrain::sdk {

struct TargetLogProbs {
  at::Tensor log_probs;  // [B, T] float32: log p(target | prefix) where loss_mask, 0 elsewhere; differentiable
  at::Tensor is_argmax;  // [B, T] bool: target is the model's most likely token (false outside loss_mask)
  at::Tensor entropy;    // [B, T] float32, no gradient: entropy of the next-token distribution where loss_mask
                         // (0 elsewhere); undefined unless target_log_probs_and_entropy computed it
};

class LanguageModel {
 public:
  virtual ~LanguageModel() = default;

  // Log-probabilities of batch.target_ids, computed only at positions of
  // batch.loss_mask and without materialising a full-vocabulary log-softmax.
  virtual TargetLogProbs target_log_probs(const TokenBatch& batch) = 0;

  // target_log_probs plus the entropy of each trained position's
  // next-token distribution (GRPO's entropy metric and high-entropy token
  // selection), from the same rows. The default leaves entropy undefined.
  virtual TargetLogProbs target_log_probs_and_entropy(const TokenBatch& batch) { return target_log_probs(batch); }

  // Full next-token logits. input_ids: [B, T] int64 → [B, T, V] float32.
  virtual at::Tensor logits(const at::Tensor& input_ids) = 0;

  virtual int64_t vocab_size() const = 0;
  virtual int64_t num_parameters() const = 0;

  // this ← alpha·source + (1 − alpha)·this, parameter by parameter, without
  // gradients (TR-DPO's reference sync; alpha = 1 copies). The models must
  // have the same architecture; throws sdk::ModelError otherwise.
  virtual void soft_update_from(const LanguageModel& source, double alpha) = 0;

  // The weights by name (transformers' names), sharing storage with the
  // model: a plugin saves and restores a model it changes (TR-DPO's synced
  // reference) through TrainModule::save_state. Empty for models without named weights.
  virtual std::vector<std::pair<std::string, at::Tensor>> named_parameters() const { return {}; }
};

}  // namespace ptrain::sdk
