// The SFT step loss computed straight from its definition, as the reference
// that split-invariance tests compare the update step against: each sequence
// alone and unpadded, through the full-vocabulary log_softmax of
// CausalLm::logits — none of the plugin's collate, masking or
// target-log-prob code.
#pragma once

#include "core/model/causal_lm.h"
#include "ptrain/sdk/util/aggregation.h"

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

namespace ptrain::testing {

struct PromptCompletion {
  std::string prompt;
  std::string completion;
};

// L of the global batch for one aggregation mode (docs/architecture.md#the-update-step), with byte
// tokens <bos> prompt completion <eos> cut to max_length; differentiable.
at::Tensor reference_sft_step_loss(model::CausalLm& model, const std::vector<PromptCompletion>& batch,
                                   const sdk::AggregationSpec& spec, int64_t max_length);

// ‖actual − expected‖ / ‖expected‖ over all tensors, in double.
double relative_error(const std::vector<at::Tensor>& actual, const std::vector<at::Tensor>& expected);

// The gradients of L with respect to the model's parameters (in named_parameters() order).
std::vector<at::Tensor> reference_sft_gradients(model::CausalLm& model, const std::vector<PromptCompletion>& batch,
                                                const sdk::AggregationSpec& spec, int64_t max_length);

}  // namespace ptrain::testing
