#include "core/train/update_step.h"

#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>

#include <cmath>

namespace ptrain::train {
namespace {

// Packs the gradients into one buffer so the cross-rank sum is one collective.
void all_reduce_gradients(const std::vector<at::Tensor>& parameters, dist::Communicator& communicator) {
  if (communicator.world_size() == 1) return;
  std::vector<at::Tensor> grads;
  grads.reserve(parameters.size());
  for (const at::Tensor& parameter : parameters) grads.push_back(parameter.grad().reshape({-1}));
  std::vector<at::Tensor> flat{at::cat(grads)};
  communicator.all_reduce_sum(flat);
  int64_t offset = 0;
  for (const at::Tensor& parameter : parameters) {
    const int64_t count = parameter.numel();
    parameter.grad().copy_(flat[0].narrow(0, offset, count).view_as(parameter));
    offset += count;
  }
}

void zero_gradients(const std::vector<at::Tensor>& parameters) {
  for (const at::Tensor& parameter : parameters) {
    at::Tensor grad = parameter.mutable_grad();
    if (grad.defined()) {
      grad.zero_();
    } else {
      parameter.mutable_grad() = at::zeros_like(parameter);
    }
  }
}

}  // namespace

std::vector<sdk::MetricSpec> core_step_metric_specs() {
  return {{"core/loss_sum", sdk::Reduction::kSum},
          {"core/tokens", sdk::Reduction::kSum},
          {"core/padded_tokens", sdk::Reduction::kSum}};
}

GradientResult accumulate_gradients(sdk::TrainModule& module, sdk::Context& context,
                                    const std::vector<const sdk::Example*>& rank_examples,
                                    const sdk::MicrobatchPlan& plan, const std::vector<at::Tensor>& parameters,
                                    dist::Communicator& communicator, metrics::MetricReducer& reducer) {
  GradientResult result;
  zero_gradients(parameters);

  std::vector<std::unique_ptr<sdk::Microbatch>> microbatches;
  if (!rank_examples.empty()) microbatches = module.prepare(context, rank_examples, plan);
  result.num_microbatches = static_cast<int64_t>(microbatches.size());

  int64_t local_units = 0;
  for (const auto& microbatch : microbatches) {
    const int64_t units = module.count_units(*microbatch);
    if (units < 0) throw sdk::PluginError("count_units returned a negative count (" + std::to_string(units) + ")");
    local_units += units;
  }
  result.global_units = dist::all_reduce_sum(communicator, local_units);
  result.has_units = result.global_units > 0;

  if (result.has_units) {
    result.loss_divisor = module.loss_divisor(result.global_units);
    for (const auto& microbatch : microbatches) {
      sdk::LossOut out = module.microbatch_loss(context, *microbatch);
      TORCH_CHECK(out.loss_sum.defined() && out.loss_sum.numel() == 1,
                  "microbatch_loss must return a scalar loss_sum, got ",
                  out.loss_sum.defined() ? out.loss_sum.sizes() : at::IntArrayRef{});
      // Only the division by the global divisor makes accumulation exact.
      if (out.loss_sum.requires_grad()) (out.loss_sum / result.loss_divisor).backward();
      reducer.add("core/loss_sum", out.loss_sum.item<double>());
      reducer.add(out.metrics);
    }
    // Every rank takes the same branch (has_units is global), so this
    // collective is symmetric.
    all_reduce_gradients(parameters, communicator);
  }
  for (const auto& microbatch : microbatches) {
    reducer.add("core/tokens", static_cast<double>(microbatch->num_tokens));
    reducer.add("core/padded_tokens", static_cast<double>(microbatch->padded_tokens));
  }
  return result;
}

double clip_grad_norm(const std::vector<at::Tensor>& parameters, double max_norm) {
  std::vector<at::Tensor> squared_norms;
  squared_norms.reserve(parameters.size());
  for (const at::Tensor& parameter : parameters) {
    if (parameter.grad().defined()) squared_norms.push_back(parameter.grad().pow(2).sum().to(at::kDouble));
  }
  if (squared_norms.empty()) return 0.0;
  const double norm = std::sqrt(at::stack(squared_norms).sum().item<double>());
  if (max_norm > 0.0 && std::isfinite(norm) && norm > max_norm) {
    const double scale = max_norm / (norm + 1e-6);
    for (const at::Tensor& parameter : parameters) {
      if (parameter.grad().defined()) parameter.grad().mul_(scale);
    }
  }
  return norm;
}

}  // namespace ptrain::train
