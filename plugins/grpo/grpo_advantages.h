// Group-relative advantages (Shao et al. 2024, DeepSeekMath §4.1.2):
//   A_i = (r_i − mean(r_group)) / (s + 1e-4)
// with s the unbiased std of the prompt's group (scale_rewards = group), of
// the whole global batch (batch; Liu et al. 2025 argue against per-group
// scaling), or no division at all (none: A_i = r_i − mean, as Dr. GRPO).
// A group of identical rewards gets A = 0.
//
// With several reward functions r_f and weights w_f the signal is either
// r = Σ_f w_f r_f (sum_then_normalize) or, as TRL's multi_objective_aggregation
// and GDPO, c = Σ_f w_f · (each r_f normalised within its group), which is
// then normalised over the global batch: A = (c − mean(c)) / (s(c) + 1e-4),
// whatever scale_rewards says (normalize_then_sum).
//
// A prompt's group never leaves its rank, so everything but the batch-level
// statistics is local; those come from RewardSums, summed over the ranks in
// one collective.
#pragma once

#include "grpo_config.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

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

// What the advantages depend on besides the rewards.
struct AdvantageSettings {
  std::vector<double> reward_weights;  // w_f, one per reward function
  RewardAggregation aggregation = RewardAggregation::kSumThenNormalize;
  ScaleRewards scale = ScaleRewards::kGroup;
};

// The sums over completions that the global batch's statistics need
// (scale_rewards = batch, normalize_then_sum, rewards/<fn>/std). Each rank
// takes its own with local_reward_sums; all_reduce_sum of pack_reward_sums()
// and unpack_reward_sums() give the global batch's.
struct RewardSums {
  double completions = 0.0;
  double total = 0.0;  // Σ r, r = Σ_f w_f r_f
  double total_squares = 0.0;
  double combined = 0.0;  // Σ c of normalize_then_sum; 0 under sum_then_normalize
  double combined_squares = 0.0;
  std::vector<double> function;  // Σ r_f, per reward function
  std::vector<double> function_squares;
};

// rewards: [P, G, F] float64, F = settings.reward_weights.size().
RewardSums local_reward_sums(const at::Tensor& rewards, const AdvantageSettings& settings);

// [5 + 2F] float64, for one all_reduce_sum.
at::Tensor pack_reward_sums(const RewardSums& sums);
RewardSums unpack_reward_sums(const at::Tensor& packed, int64_t num_functions);

// Per reward function, the unbiased std of its rewards over the global batch.
std::vector<double> function_batch_stds(const RewardSums& global);

// A rank's groups, scored.
struct Advantages {
  at::Tensor advantage;  // [P, G] float64
  at::Tensor reward;     // [P, G] float64, r = Σ_f w_f r_f
  at::Tensor group_std;  // [P] float64, unbiased std of each group's r
};

// rewards: [P, G, F] float64, this rank's; global: the global batch's sums.
Advantages compute_advantages(const at::Tensor& rewards, const AdvantageSettings& settings, const RewardSums& global);

}  // namespace ptrain::grpo
