#include "core/train/update_step.h"

#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>

#include <cmath>
#include <set>
#include <string>

namespace ptrain::train {
namespace {

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

std::vector<sdk::MetricSpec> step_metric_specs(const sdk::TrainModule& module) {
  std::vector<sdk::MetricSpec> specs{{"core/loss", sdk::Reduction::kSum},
                                     {"core/tokens", sdk::Reduction::kSum},
                                     {"core/padded_tokens", sdk::Reduction::kSum}};
  static const std::set<std::string> reserved{"loss",   "grad_norm", "lr",  "units",         "tokens", "tokens_per_s",
                                              "step_s", "comm_s",    "mfu", "skipped_steps", "epoch",  "step",
                                              "nonfinite_steps", "loss_spikes"};
  for (const sdk::MetricSpec& spec : module.metric_specs()) {
    if (reserved.count(spec.name) != 0 || spec.name.rfind("core/", 0) == 0) {
      throw sdk::PluginError("plugin metric '" + spec.name + "' clashes with a core metric name");
    }
    specs.push_back(spec);
  }
  return specs;
}

GradientResult accumulate_gradients(sdk::TrainModule& module, sdk::Context& context,
                                    const std::vector<const sdk::Example*>& rank_examples,
                                    const sdk::MicrobatchPlan& plan, const std::vector<at::Tensor>& parameters,
                                    dist::Communicator& communicator, dist::GradientSynchronizer& grad_sync,
                                    metrics::MetricReducer& reducer) {
  GradientResult result;
  zero_gradients(parameters);

  // Every rank prepares, even with no examples this step: a plugin may run a
  // collective or a scheduled update there (DPO's reference sync).
  std::vector<std::unique_ptr<sdk::Microbatch>> microbatches = module.prepare(context, rank_examples, plan);
  result.num_microbatches = static_cast<int64_t>(microbatches.size());

  // Unit counts of the main term and of each extra term, summed over this
  // rank's microbatches, then over ranks in one collective.
  const size_t num_extra = module.num_extra_loss_terms();
  std::vector<int64_t> local_units(1 + num_extra, 0);
  for (const auto& microbatch : microbatches) {
    local_units[0] += module.count_units(*microbatch);
    const std::vector<int64_t> extra = module.count_extra_units(*microbatch);
    if (extra.size() != num_extra) {
      throw sdk::PluginError("count_extra_units returned " + std::to_string(extra.size()) + " counts for " +
                             std::to_string(num_extra) + " extra loss terms");
    }
    for (size_t j = 0; j < num_extra; ++j) local_units[1 + j] += extra[j];
  }
  for (const int64_t units : local_units) {
    if (units < 0) throw sdk::PluginError("a unit count is negative (" + std::to_string(units) + ")");
  }
  std::vector<at::Tensor> packed_units{at::tensor(local_units, at::kLong)};
  communicator.all_reduce_sum(packed_units);
  const std::vector<int64_t> global_units(packed_units[0].data_ptr<int64_t>(),
                                          packed_units[0].data_ptr<int64_t>() + packed_units[0].numel());
  result.global_units = global_units[0];
  result.global_extra_units.assign(global_units.begin() + 1, global_units.end());
  for (const int64_t units : global_units) result.has_units = result.has_units || units > 0;

  if (result.has_units) {
    // Each term's weight in L; a term without units anywhere adds nothing.
    std::vector<double> term_scale(1 + num_extra, 0.0);
    if (global_units[0] > 0) term_scale[0] = 1.0 / module.loss_divisor(global_units[0]);
    for (size_t j = 0; j < num_extra; ++j) {
      if (global_units[1 + j] > 0) term_scale[1 + j] = 1.0 / module.extra_loss_divisor(j, global_units[1 + j]);
    }
    at::Tensor local_loss;  // this rank's share of L
    for (size_t k = 0; k < microbatches.size(); ++k) {
      const sdk::Microbatch& microbatch = *microbatches[k];
      sdk::LossOut out = module.microbatch_loss(context, microbatch);
      TORCH_CHECK(out.loss_sum.defined() && out.loss_sum.numel() == 1,
                  "microbatch_loss must return a scalar loss_sum");
      TORCH_CHECK(out.extra_loss_sums.size() == num_extra, "microbatch_loss returned ", out.extra_loss_sums.size(),
                  " extra loss sums for ", num_extra, " extra loss terms");
      // Only the division by global divisors makes accumulation exact.
      at::Tensor scaled_loss = out.loss_sum * term_scale[0];
      for (size_t j = 0; j < num_extra; ++j) scaled_loss = scaled_loss + out.extra_loss_sums[j] * term_scale[1 + j];
      if (k + 1 == microbatches.size()) grad_sync.arm_for_last_backward();
      if (scaled_loss.requires_grad()) scaled_loss.backward();
      // Summed on the loss's device and read once after the loop: a read per
      // microbatch would wait for each one's kernels on a GPU.
      local_loss = local_loss.defined() ? local_loss + scaled_loss.detach().to(at::kDouble)
                                        : scaled_loss.detach().to(at::kDouble);
      reducer.add(out.metrics);
    }
    if (local_loss.defined()) {
      result.local_loss = local_loss.item<double>();
      reducer.add("core/loss", result.local_loss);
    }
    // Every rank takes the same branch (has_units is global), so the
    // gradient all-reduce is symmetric, also on a rank without microbatches.
    grad_sync.finish();
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
