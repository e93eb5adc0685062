#include "grpo_advantages.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

namespace ptrain::grpo {

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

}  // namespace ptrain::grpo
