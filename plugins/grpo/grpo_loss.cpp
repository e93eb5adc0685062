#include "grpo_loss.h"

#include <ATen/ATen.h>

namespace ptrain::grpo {

TokenLoss grpo_token_loss(const TokenLossInputs& inputs, const GrpoConfig& config) {
  const at::Tensor& mask = inputs.mask;
  TORCH_CHECK(inputs.log_probs.sizes() == mask.sizes() && inputs.old_log_probs.sizes() == mask.sizes(), "log-probs ",
              inputs.log_probs.sizes(), " and old log-probs ", inputs.old_log_probs.sizes(),
              " must have the mask's shape ", mask.sizes());
  TORCH_CHECK(inputs.advantages.dim() == 1 && inputs.advantages.size(0) == mask.size(0), "advantages must be [",
              mask.size(0), "], got ", inputs.advantages.sizes());
  const at::Tensor weight = mask.to(at::kDouble);
  const at::Tensor log_ratio = (inputs.log_probs - inputs.old_log_probs) * weight;  // [B, T]
  at::Tensor log_importance = log_ratio;
  if (config.importance_sampling == ImportanceSampling::kSequence) {
    const at::Tensor tokens = weight.sum(1, /*keepdim=*/true).clamp_min(1.0);
    log_importance = (log_ratio.sum(1, /*keepdim=*/true) / tokens).expand_as(log_ratio);
  }
  const at::Tensor ratio = at::exp(log_importance);
  const at::Tensor clipped = ratio.clamp(1.0 - config.epsilon_low, 1.0 + config.epsilon_high);
  const at::Tensor advantages = inputs.advantages.unsqueeze(1);  // [B, 1]
  at::Tensor loss = -at::min(ratio * advantages, clipped * advantages);
  if (config.delta) {
    loss = at::where(advantages < 0, at::min(loss, -advantages * *config.delta), loss);
  }

  TokenLoss out;
  if (inputs.ref_log_probs.defined() && config.beta > 0.0) {
    const at::Tensor x = inputs.ref_log_probs - inputs.log_probs;
    at::Tensor kl;
    switch (config.kl_estimator) {
      case KlEstimator::kK1:
        kl = -x;
        break;
      case KlEstimator::kK2:
        kl = 0.5 * x * x;
        break;
      case KlEstimator::kK3:
        kl = at::exp(x) - x - 1.0;
        break;
    }
    loss = loss + config.beta * kl;
    out.kl = (kl * weight).detach();
  }
  out.loss = loss * weight;
  out.ratio = ratio.detach();
  const at::Tensor detached_ratio = out.ratio;
  out.low_clipped = (detached_ratio < 1.0 - config.epsilon_low) & (advantages < 0) & mask;
  out.high_clipped = (detached_ratio > 1.0 + config.epsilon_high) & (advantages > 0) & mask;
  return out;
}

}  // namespace ptrain::grpo
