// Group-relative advantages (Shao et al. 2024, DeepSeekMath §4.1.2):
//   A_i = (r_i − mean(r_group)) / (s + 1e-4)
// with s the unbiased std of the prompt's group (scale_rewards = group), of
// the whole global batch (batch; Liu et al. 2025 argue against per-group
// scaling), or no division at all (none: A_i = r_i − mean, as Dr. GRPO).
// A group of identical rewards gets A = 0.
#pragma once

#include "grpo_config.h"

#include <ATen/core/Tensor.h>

namespace ptrain::grpo {

inline constexpr double kAdvantageEpsilon = 1e-4;

// A group has zero reward variance (frac_reward_zero_std, filter_zero_std_groups)
// when its std is within 1e-8 of 0, as TRL's torch.isclose(std, 0) (atol 1e-8;
// rtol does not act at 0): rewards equal on paper but summed from different
// parts (0.7 + 0.1 and 0.8) differ in their last bits, and their std (~1e-17)
// is no signal to learn from.
inline constexpr double kZeroStdTolerance = 1e-8;
inline bool is_zero_std(double group_std) { return group_std <= kZeroStdTolerance; }

// Unbiased std of each group. rewards: [P, G] float64 → [P].
at::Tensor group_std(const at::Tensor& rewards);

// rewards: [P, G] float64 → [P, G]. batch_std: the unbiased std of the
// rewards of every completion in the global batch (used by kBatch only).
at::Tensor group_advantages(const at::Tensor& rewards, ScaleRewards scale, double batch_std);

// Unbiased std from global sums over n values: √((Σx² − (Σx)²/n) / (n − 1)); 0 for n < 2.
double std_from_sums(double n, double sum, double sum_squares);

}  // namespace ptrain::grpo
