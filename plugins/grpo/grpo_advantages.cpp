#include "grpo_advantages.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

namespace ptrain::grpo {
namespace {

// Offsets in pack_reward_sums' tensor; the functions' sums follow, Σ r_f and Σ r_f² per f.
enum PackedSum : int64_t { kCompletions, kTotal, kTotalSquares, kCombined, kCombinedSquares, kFunctions };

void check_rewards(const at::Tensor& rewards, const AdvantageSettings& settings) {
  TORCH_CHECK(rewards.dim() == 3 && rewards.size(2) == static_cast<int64_t>(settings.reward_weights.size()),
              "rewards must be [P, G, F] with F = ", settings.reward_weights.size(), " reward functions, got ",
              rewards.sizes());
}

// r = Σ_f w_f r_f. rewards: [P, G, F] → [P, G].
at::Tensor weighted_reward(const at::Tensor& rewards, const std::vector<double>& weights) {
  return (rewards * at::tensor(weights, at::kDouble)).sum(2);
}

// c = Σ_f w_f · (r_f normalised within its group), whatever scale_rewards says.
// rewards: [P, G, F] → [P, G].
at::Tensor normalized_combination(const at::Tensor& rewards, const std::vector<double>& weights) {
  at::Tensor combined = at::zeros({rewards.size(0), rewards.size(1)}, at::kDouble);
  for (size_t f = 0; f < weights.size(); ++f) {
    combined += weights[f] * group_advantages(rewards.select(2, static_cast<int64_t>(f)), ScaleRewards::kGroup, 0.0);
  }
  return combined;
}

}  // namespace

at::Tensor group_std(const at::Tensor& rewards) {
  TORCH_CHECK(rewards.dim() == 2, "rewards must be [P, G], got ", rewards.sizes());
  if (rewards.size(1) < 2) return at::zeros({rewards.size(0)}, rewards.options());
  return rewards.std(1, /*unbiased=*/true);
}

at::Tensor group_advantages(const at::Tensor& rewards, ScaleRewards scale, double batch_std) {
  const at::Tensor centered = rewards - rewards.mean(1, /*keepdim=*/true);
  switch (scale) {
    case ScaleRewards::kGroup:
      return centered / (group_std(rewards).unsqueeze(1) + kAdvantageEpsilon);
    case ScaleRewards::kBatch:
      return centered / (batch_std + kAdvantageEpsilon);
    case ScaleRewards::kNone:
      break;
  }
  return centered;
}

double std_from_sums(double n, double sum, double sum_squares) {
  if (n < 2.0) return 0.0;
  return std::sqrt(std::max(0.0, (sum_squares - sum * sum / n) / (n - 1.0)));
}

RewardSums local_reward_sums(const at::Tensor& rewards, const AdvantageSettings& settings) {
  check_rewards(rewards, settings);
  RewardSums sums;
  sums.completions = static_cast<double>(rewards.size(0) * rewards.size(1));
  const at::Tensor total = weighted_reward(rewards, settings.reward_weights);
  sums.total = total.sum().item<double>();
  sums.total_squares = total.pow(2).sum().item<double>();
  if (settings.aggregation == RewardAggregation::kNormalizeThenSum) {
    const at::Tensor combined = normalized_combination(rewards, settings.reward_weights);
    sums.combined = combined.sum().item<double>();
    sums.combined_squares = combined.pow(2).sum().item<double>();
  }
  for (int64_t f = 0; f < rewards.size(2); ++f) {
    sums.function.push_back(rewards.select(2, f).sum().item<double>());
    sums.function_squares.push_back(rewards.select(2, f).pow(2).sum().item<double>());
  }
  return sums;
}

at::Tensor pack_reward_sums(const RewardSums& sums) {
  TORCH_CHECK(sums.function.size() == sums.function_squares.size(), "reward sums of ", sums.function.size(),
              " functions with squares of ", sums.function_squares.size());
  std::vector<double> packed(kFunctions);
  packed[kCompletions] = sums.completions;
  packed[kTotal] = sums.total;
  packed[kTotalSquares] = sums.total_squares;
  packed[kCombined] = sums.combined;
  packed[kCombinedSquares] = sums.combined_squares;
  for (size_t f = 0; f < sums.function.size(); ++f) {
    packed.push_back(sums.function[f]);
    packed.push_back(sums.function_squares[f]);
  }
  return at::tensor(packed, at::kDouble);
}

RewardSums unpack_reward_sums(const at::Tensor& packed, int64_t num_functions) {
  TORCH_CHECK(packed.dim() == 1 && packed.size(0) == kFunctions + 2 * num_functions, "packed reward sums of ",
              num_functions, " functions must be [", kFunctions + 2 * num_functions, "], got ", packed.sizes());
  const at::Tensor host = packed.to(at::kCPU, at::kDouble).contiguous();
  const double* values = host.data_ptr<double>();
  RewardSums sums;
  sums.completions = values[kCompletions];
  sums.total = values[kTotal];
  sums.total_squares = values[kTotalSquares];
  sums.combined = values[kCombined];
  sums.combined_squares = values[kCombinedSquares];
  for (int64_t f = 0; f < num_functions; ++f) {
    sums.function.push_back(values[kFunctions + 2 * f]);
    sums.function_squares.push_back(values[kFunctions + 2 * f + 1]);
  }
  return sums;
}

std::vector<double> function_batch_stds(const RewardSums& global) {
  std::vector<double> stds;
  for (size_t f = 0; f < global.function.size(); ++f) {
    stds.push_back(std_from_sums(global.completions, global.function[f], global.function_squares[f]));
  }
  return stds;
}

Advantages compute_advantages(const at::Tensor& rewards, const AdvantageSettings& settings, const RewardSums& global) {
  check_rewards(rewards, settings);
  Advantages out;
  out.reward = weighted_reward(rewards, settings.reward_weights);
  out.group_std = group_std(out.reward);
  if (settings.aggregation == RewardAggregation::kSumThenNormalize) {
    const double batch_std = std_from_sums(global.completions, global.total, global.total_squares);
    out.advantage = group_advantages(out.reward, settings.scale, batch_std);
    return out;
  }
  // (c − its global-batch mean) / (its global-batch unbiased std + 1e-4), as TRL.
  const double n = global.completions;
  const double mean = n > 0.0 ? global.combined / n : 0.0;
  const double batch_std = std_from_sums(n, global.combined, global.combined_squares);
  out.advantage = (normalized_combination(rewards, settings.reward_weights) - mean) / (batch_std + kAdvantageEpsilon);
  return out;
}

}  // namespace ptrain::grpo
