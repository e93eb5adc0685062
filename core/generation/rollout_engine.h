// The core's sdk::RolloutEngine: batched autoregressive sampling from a
// CausalLm with its KV cache (or, for comparison, by recomputing the whole
// prefix every token).
//
// Prompts of a batch are left-padded to a common length; each row's rotary
// positions start at 0 at its first real token and padding is never attended
// to, so a row's tokens are those it would get alone. Rows leave the batch
// (and the cache) as soon as they finish.
#pragma once

#include "core/model/causal_lm.h"
#include "ptrain/sdk/generation.h"
#include "ptrain/sdk/tokenizer.h"

#include <vector>

namespace ptrain::generation {

class CausalLmRolloutEngine final : public sdk::RolloutEngine {
 public:
  // `tokenizer` gives <eos>, the padding id and the text stop strings are matched in.
  CausalLmRolloutEngine(model::CausalLm& model, const sdk::Tokenizer& tokenizer)
      : model_(model), tokenizer_(tokenizer) {}

  std::vector<sdk::Rollout> generate(const std::vector<sdk::RolloutRequest>& requests,
                                     const sdk::SamplingParams& params, int64_t max_batch = 0) override;
  // A sharded model's layers gathered whole once per generate() call, not
  // at every decoding step (distributed.generation_gather = "whole").
  void set_hold_whole_model(bool hold) { hold_whole_model_ = hold; }

 private:
  void generate_batch(const std::vector<sdk::RolloutRequest>& requests, const sdk::SamplingParams& params,
                      std::vector<sdk::Rollout>& rollouts);

  model::CausalLm& model_;
  const sdk::Tokenizer& tokenizer_;
  bool hold_whole_model_ = false;
};

}  // namespace ptrain::generation
