// What KTO computes with the models: completion log-probs, and the KL
// reference point z0 of a global batch (kto_loss.h gives the formulas).
//
// z0 belongs to the whole global batch: each rank scores the KL pairs of its
// own examples (a partner's completion may be another rank's example: every
// rank sees the batch through ctx.global_batch()), then all ranks gather the
// log-ratios with their positions and average them in batch order. Every
// rank gets the same z0, for any world size and microbatch split.
#pragma once

#include "kto_data.h"

#include "ptrain/sdk/context.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace ptrain::kto {

// Σ over each row's loss mask of log π(target | prefix): [B] float64,
// differentiable when the model is (the policy outside no-grad).
at::Tensor completion_log_probs(sdk::LanguageModel& model, const sdk::TokenBatch& batch);

// log π(y|x) − log π_ref(y|x) of each sequence, without gradients, the
// sequences cut into chunks by `plan`: [n] float64 on ctx.device(). Reports
// the forwards' tokens (policy and reference) through ctx.add_forward_tokens.
at::Tensor kl_log_ratios(sdk::Context& ctx, sdk::LanguageModel& reference, const std::vector<PromptCompletion>& pairs,
                         const sdk::MicrobatchPlan& plan, int64_t max_length);

// z0 of the global batch whose examples, tokenized and in batch order, are
// `batch` (ctx.global_batch()'s), this rank scoring the KL pairs of the
// positions in `rank_positions`. Collective (one all_gather). A 0-dim
// float64 tensor on ctx.device().
at::Tensor global_reference_point(sdk::Context& ctx, sdk::LanguageModel& reference,
                                  const std::vector<const KtoExample*>& batch,
                                  const std::vector<int64_t>& rank_positions, const sdk::MicrobatchPlan& plan,
                                  int64_t max_length);

}  // namespace ptrain::kto
