// KTO's loss, as TRL's KTOTrainer computes it (Ethayarajh et al. 2024,
// "KTO: Model Alignment as Prospect Theoretic Optimization", eq. 7-8).
//
// For an example (x, y) with log-ratio r = log π(y|x) − log π_ref(y|x)
// (sums over y's tokens) and the KL reference point z0:
//   desirable     ℓ = λ_D · (1 − σ(β (r − z0)))
//   undesirable   ℓ = λ_U · (1 − σ(β (z0 − r)))
// The step loss is the mean of ℓ over the global batch's examples (the unit
// is the example; S = Σ ℓ over a microbatch's examples). z0 estimates the KL
// divergence of the policy from the reference on mismatched pairs:
//   z0 = max(0, mean_i [log π(y_p(i) | x_i) − log π_ref(y_p(i) | x_i)])
// over the batch's examples i, y_p(i) the completion of the example before i
// in batch order, cyclically (TRL rotates completions by one within a batch),
// with no gradient through it. The estimate belongs to the whole batch, so a
// microbatch must not estimate its own: kto_reference_point.h computes it
// over the global batch, whatever the split.
//
// apo_zero_unpaired (D'Oosterlinck et al. 2024, unpaired APO-zero) has no z0:
//   desirable ℓ = λ_D · (1 − σ(β r)),   undesirable ℓ = λ_U · σ(β r).
#pragma once

#include "kto_config.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace ptrain::kto {

// For each position of a batch, the position whose completion its KL pair
// takes: the previous scorable one, cyclically (the last for the first), or
// -1 for an example that is not scorable. A batch with one scorable example
// pairs it with itself.
std::vector<int64_t> kl_partners(const std::vector<bool>& scorable);

// z0 from the KL log-ratios of a batch's pairs ([n] float64): max(0, mean),
// and 0 for no pairs. A 0-dim float64 tensor on the values' device.
at::Tensor reference_point(const at::Tensor& kl_log_ratios);

struct KtoLosses {
  at::Tensor losses;   // [B] ℓ of each example, weight included (float64)
  at::Tensor rewards;  // [B] β r, no gradient: TRL's rewards/chosen and rewards/rejected
};

// policy_logps, reference_logps: [B] float64 sums over each completion;
// desirable: [B] bool; z0: 0-dim float64 (ignored by apo_zero_unpaired).
KtoLosses kto_losses(const at::Tensor& policy_logps, const at::Tensor& reference_logps, const at::Tensor& desirable,
                     const at::Tensor& z0, const KtoConfig& config);

}  // namespace ptrain::kto
