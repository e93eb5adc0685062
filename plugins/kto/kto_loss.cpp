#include "kto_loss.h"

#include <ATen/ATen.h>

namespace ptrain::kto {

std::vector<int64_t> kl_partners(const std::vector<bool>& scorable) {
  std::vector<int64_t> partners(scorable.size(), -1);
  int64_t last = -1;  // the last scorable position: the first one's partner
  for (size_t i = 0; i < scorable.size(); ++i) {
    if (scorable[i]) last = static_cast<int64_t>(i);
  }
  int64_t previous = last;
  for (size_t i = 0; i < scorable.size(); ++i) {
    if (!scorable[i]) continue;
    partners[i] = previous;
    previous = static_cast<int64_t>(i);
  }
  return partners;
}

at::Tensor reference_point(const at::Tensor& kl_log_ratios) {
  const at::Tensor values = kl_log_ratios.to(at::kDouble);
  if (values.numel() == 0) return at::zeros({}, values.options());
  return values.mean().clamp_min(0.0);
}

KtoLosses kto_losses(const at::Tensor& policy_logps, const at::Tensor& reference_logps, const at::Tensor& desirable,
                     const at::Tensor& z0, const KtoConfig& config) {
  const at::Tensor log_ratios = policy_logps - reference_logps;
  const double beta = config.beta;
  at::Tensor desirable_losses;
  at::Tensor undesirable_losses;
  if (config.loss_type == KtoLossType::kKto) {
    desirable_losses = 1.0 - at::sigmoid(beta * (log_ratios - z0));
    undesirable_losses = 1.0 - at::sigmoid(beta * (z0 - log_ratios));
  } else {
    desirable_losses = 1.0 - at::sigmoid(beta * log_ratios);
    undesirable_losses = at::sigmoid(beta * log_ratios);
  }
  KtoLosses out;
  out.losses =
      at::where(desirable, config.desirable_weight * desirable_losses, config.undesirable_weight * undesirable_losses);
  out.rewards = beta * log_ratios.detach();
  return out;
}

}  // namespace ptrain::kto
