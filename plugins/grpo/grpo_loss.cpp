#include "grpo_loss.h"

#include <ATen/ATen.h>

namespace ptrain::grpo {
namespace {

// PPO's clipped surrogate, with DAPO's clip-higher and the dual clip.
// ratio, advantages: [B, T], [B, 1].
at::Tensor clipped_surrogate(const at::Tensor& ratio, const at::Tensor& advantages, const GrpoConfig& config) {
  const at::Tensor clipped = ratio.clamp(1.0 - config.epsilon_low, 1.0 + config.epsilon_high);
  at::Tensor loss = -at::min(ratio * advantages, clipped * advantages);
  if (config.delta) loss = at::where(advantages < 0, at::min(loss, -advantages * *config.delta), loss);
  return loss;
}

// CISPO: the clipped importance weight, detached, scales −A·log π, so every
// token keeps its gradient −ŵ·A·∇log π.
at::Tensor cispo_surrogate(const at::Tensor& ratio, const at::Tensor& log_probs, const at::Tensor& advantages,
                           const GrpoConfig& config) {
  const at::Tensor weight = ratio.detach().clamp(1.0 - config.cispo_epsilon_low, 1.0 + config.cispo_epsilon_high);
  return -weight * advantages * log_probs;
}

// SAPO: −(4/τ)·σ(τ·(w − 1))·A, τ = τ_pos for A > 0, τ_neg otherwise.
at::Tensor sapo_surrogate(const at::Tensor& ratio, const at::Tensor& advantages, const GrpoConfig& config) {
  const at::Tensor tau = at::where(advantages > 0, at::full_like(advantages, config.sapo_tau_pos),
                                   at::full_like(advantages, config.sapo_tau_neg));
  return -(4.0 / tau) * at::sigmoid(tau * (ratio - 1.0)) * advantages;
}

at::Tensor kl_estimate(const at::Tensor& ref_log_probs, const at::Tensor& log_probs, KlEstimator estimator) {
  const at::Tensor x = ref_log_probs - log_probs;
  switch (estimator) {
    case KlEstimator::kK1:
      return -x;
    case KlEstimator::kK2:
      return 0.5 * x * x;
    case KlEstimator::kK3:
      break;
  }
  return at::exp(x) - x - 1.0;
}

}  // namespace

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
  const at::Tensor advantages = inputs.advantages.unsqueeze(1);  // [B, 1]
  at::Tensor loss;
  switch (config.policy_loss) {
    case PolicyLoss::kClip:
      loss = clipped_surrogate(ratio, advantages, config);
      break;
    case PolicyLoss::kCispo:
      loss = cispo_surrogate(ratio, inputs.log_probs, advantages, config);
      break;
    case PolicyLoss::kSapo:
      loss = sapo_surrogate(ratio, advantages, config);
      break;
  }

  TokenLoss out;
  if (inputs.ref_log_probs.defined() && config.beta > 0.0) {
    const at::Tensor kl = kl_estimate(inputs.ref_log_probs, inputs.log_probs, config.kl_estimator);
    loss = loss + config.beta * kl;
    out.kl = (kl * weight).detach();
  }
  out.loss = loss * weight;
  out.ratio = ratio.detach();
  const at::Tensor& w = out.ratio;
  switch (config.policy_loss) {
    case PolicyLoss::kClip:
      out.low_clipped = (w < 1.0 - config.epsilon_low) & (advantages < 0) & mask;
      out.high_clipped = (w > 1.0 + config.epsilon_high) & (advantages > 0) & mask;
      break;
    case PolicyLoss::kCispo:  // the weight is clipped whatever the advantage's sign
      out.low_clipped = (w < 1.0 - config.cispo_epsilon_low) & mask;
      out.high_clipped = (w > 1.0 + config.cispo_epsilon_high) & mask;
      break;
    case PolicyLoss::kSapo:  // a soft gate clips nothing
      out.low_clipped = at::zeros_like(mask);
      out.high_clipped = at::zeros_like(mask);
      break;
  }
  return out;
}

}  // namespace ptrain::grpo
