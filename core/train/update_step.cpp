#include "core/train/update_step.h"

#include "core/log/failpoint.h"
#include "core/log/step_phases.h"
#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>

#include <cmath>
#include <optional>
#include <set>
#include <string>

namespace ptrain::train {
namespace {

using Units = std::vector<int64_t>;  // one count per loss term

// All gradients in one call (one kernel launch per group of tensors on a GPU).
void zero_gradients(const std::vector<at::Tensor>& parameters) {
  std::vector<at::Tensor> grads;
  for (const at::Tensor& parameter : parameters) {
    if (parameter.grad().defined()) {
      grads.push_back(parameter.grad());
    } else {
      parameter.mutable_grad() = at::zeros_like(parameter);
    }
  }
  if (!grads.empty()) at::_foreach_zero_(grads);
}

std::string term_metric(const sdk::LossTerm& term) { return "loss/" + term.name; }

// The microbatch's count of each term, checked against the declared terms.
Units units_of(const StepParts& parts, const std::vector<sdk::LossTerm>& terms, const sdk::Microbatch& microbatch) {
  const Units units = parts.module.count_units(microbatch);
  if (units.size() != terms.size()) {
    throw sdk::PluginError("plugin '" + parts.plugin_name + "': count_units returned " + std::to_string(units.size()) +
                           " counts for " + std::to_string(terms.size()) + " loss terms");
  }
  for (size_t j = 0; j < units.size(); ++j) {
    if (units[j] < 0) {
      throw sdk::PluginError("plugin '" + parts.plugin_name + "': loss term '" + terms[j].name +
                             "' has a negative unit count (" + std::to_string(units[j]) + ")");
    }
  }
  return units;
}

// Each term's weight in L: 1 / divisor_j(N_j), 0 for a term without units anywhere.
std::vector<double> term_scales(const std::vector<sdk::LossTerm>& terms, const Units& global_units) {
  std::vector<double> scales(terms.size(), 0.0);
  for (size_t j = 0; j < terms.size(); ++j) {
    if (global_units[j] == 0) continue;
    scales[j] = terms[j].divisor == sdk::TermDivisor::kOne ? 1.0 : 1.0 / static_cast<double>(global_units[j]);
  }
  return scales;
}

// The loss sums of one microbatch, checked: one scalar per term, and a sum
// that requires grad wherever its term has units (else its gradient would be
// silently lost).
void check_loss_sums(const StepParts& parts, const std::vector<sdk::LossTerm>& terms, const Units& units,
                     const sdk::LossOut& out, size_t microbatch) {
  const std::string plugin = "plugin '" + parts.plugin_name + "': ";
  if (out.loss_sums.size() != terms.size()) {
    throw sdk::PluginError(plugin + "microbatch_loss returned " + std::to_string(out.loss_sums.size()) +
                           " loss sums for " + std::to_string(terms.size()) + " loss terms");
  }
  for (size_t j = 0; j < terms.size(); ++j) {
    const at::Tensor& sum = out.loss_sums[j];
    const std::string term = "loss term '" + terms[j].name + "' of microbatch " + std::to_string(microbatch);
    if (!sum.defined() || sum.numel() != 1) throw sdk::PluginError(plugin + term + " is not a scalar");
    if (units[j] > 0 && !sum.requires_grad()) {
      throw sdk::PluginError(plugin + term + " has " + std::to_string(units[j]) +
                             " units but a loss sum that does not require grad: it would train nothing");
    }
  }
}

// Forward and backward of every microbatch, each term divided by its global
// divisor; returns this rank's share of each term (0-dim float64 tensors).
std::vector<at::Tensor> backward_microbatches(const StepParts& parts, const std::vector<sdk::LossTerm>& terms,
                                              const std::vector<std::unique_ptr<sdk::Microbatch>>& microbatches,
                                              const std::vector<Units>& units, const std::vector<double>& scales,
                                              metrics::MetricReducer& reducer) {
  std::vector<at::Tensor> shares(terms.size());
  for (size_t k = 0; k < microbatches.size(); ++k) {
    const log::PhaseScope forward(log::StepPhase::kForward);  // backward nests in it
    const sdk::LossOut out = parts.module.microbatch_loss(parts.context, *microbatches[k]);
    check_loss_sums(parts, terms, units[k], out, k);
    at::Tensor scaled_loss;
    for (size_t j = 0; j < terms.size(); ++j) {
      const at::Tensor scaled = out.loss_sums[j] * scales[j];
      scaled_loss = scaled_loss.defined() ? scaled_loss + scaled : scaled;
      // Summed on the loss's device and read after the loop: a read per
      // microbatch would wait for each one's kernels on a GPU.
      const at::Tensor share = scaled.detach().to(at::kDouble);
      shares[j] = shares[j].defined() ? shares[j] + share : share;
    }
    if (k + 1 == microbatches.size()) parts.grad_sync.arm_for_last_backward();
    if (scaled_loss.requires_grad()) {
      const log::PhaseScope backward(log::StepPhase::kBackward);
      scaled_loss.backward();
    }
    reducer.add(out.metrics);
  }
  return shares;
}

// PTRAIN_TEST_NAN_AT (core/log/failpoint.h): this rank's loss share and its
// reduced gradient turn NaN, as an overflow in its forward or backward would
// (the logged loss stays the reduced sum).
void inject_nonfinite_if_armed(const StepParts& parts, GradientResult& result) {
  const int64_t step = parts.context.run_info().step + 1;
  if (!failpoint::armed(failpoint::StepFault::kNonfiniteGradient, step, parts.communicator.rank())) return;
  result.local_loss = std::nan("");
  parts.parameters.front().mutable_grad().view({-1})[0] = std::nan("");
}

}  // namespace

std::vector<sdk::MetricSpec> step_metric_specs(const sdk::TrainModule& module) {
  std::vector<sdk::MetricSpec> specs{{kLossMetric, sdk::Reduction::kSum},
                                     {kTokensMetric, sdk::Reduction::kSum},
                                     {kPaddedTokensMetric, sdk::Reduction::kSum}};
  std::set<std::string> reserved{
      "loss", "grad_norm",     "lr",    "units", "tokens",          "tokens_per_s", "step_s",        "comm_s",
      "mfu",  "skipped_steps", "epoch", "step",  "nonfinite_steps", "loss_spikes",  "forward_tokens"};
  const std::vector<sdk::LossTerm> terms = module.loss_terms();
  for (const sdk::LossTerm& term : terms) {
    if (term.name.empty() || !reserved.insert(term_metric(term)).second) {
      throw sdk::PluginError("loss term '" + term.name + "' is empty or declared twice");
    }
    if (terms.size() > 1) specs.push_back({term_metric(term), sdk::Reduction::kSum});
  }
  for (const sdk::MetricSpec& spec : module.metric_specs()) {
    if (reserved.count(spec.name) != 0 || spec.name.rfind("core/", 0) == 0 || spec.name.rfind("time/", 0) == 0) {
      throw sdk::PluginError("plugin metric '" + spec.name + "' clashes with a core metric name");
    }
    specs.push_back(spec);
  }
  return specs;
}

GradientResult accumulate_gradients(const StepParts& parts, const std::vector<const sdk::Example*>& rank_examples,
                                    const sdk::MicrobatchPlan& plan, metrics::MetricReducer& reducer) {
  GradientResult result;
  zero_gradients(parts.parameters);
  if (parts.sharded_layers != nullptr) parts.sharded_layers->zero_gradients();
  const std::vector<sdk::LossTerm> terms = parts.module.loss_terms();

  // Every rank prepares, even with no examples this step: a plugin may run a
  // collective or a scheduled update there (DPO's reference sync).
  std::optional<log::PhaseScope> data_phase(std::in_place, log::StepPhase::kData);
  const std::vector<std::unique_ptr<sdk::Microbatch>> microbatches =
      parts.module.prepare(parts.context, rank_examples, plan);
  result.num_microbatches = static_cast<int64_t>(microbatches.size());

  // Each term's units over this rank's microbatches, then over ranks in one collective.
  std::vector<Units> units;
  std::vector<at::Tensor> local_units{at::zeros({static_cast<int64_t>(terms.size())}, at::kLong)};
  for (const auto& microbatch : microbatches) {
    units.push_back(units_of(parts, terms, *microbatch));
    local_units[0] += at::tensor(units.back(), at::kLong);
    microbatch->to_device(parts.context.device());  // after the host-side count, before any forward
  }
  data_phase.reset();
  {
    const log::PhaseScope collectives(log::StepPhase::kCollectives);
    parts.communicator.all_reduce_sum(local_units);
  }
  const at::Tensor global = local_units[0].contiguous();
  result.global_units.assign(global.data_ptr<int64_t>(), global.data_ptr<int64_t>() + global.numel());
  for (const int64_t count : result.global_units) result.has_units = result.has_units || count > 0;

  if (result.has_units) {
    const std::vector<at::Tensor> shares =
        backward_microbatches(parts, terms, microbatches, units, term_scales(terms, result.global_units), reducer);
    sdk::MetricList term_losses;
    at::Tensor local_loss = at::zeros({}, at::kDouble);
    for (size_t j = 0; j < terms.size(); ++j) {
      if (!shares[j].defined()) continue;
      if (terms.size() > 1) term_losses.add(term_metric(terms[j]), shares[j]);
      local_loss = local_loss + shares[j].to(at::kCPU);
    }
    reducer.add(term_losses);
    result.local_loss = local_loss.item<double>();
    reducer.add(kLossMetric, result.local_loss);
    // Every rank takes the same branch (has_units is global), so the
    // gradient all-reduce is symmetric, also on a rank without microbatches.
    const log::PhaseScope collectives(log::StepPhase::kCollectives);
    parts.grad_sync.finish();
    inject_nonfinite_if_armed(parts, result);
  }
  for (const auto& microbatch : microbatches) {
    reducer.add(kTokensMetric, static_cast<double>(microbatch->num_tokens));
    reducer.add(kPaddedTokensMetric, static_cast<double>(microbatch->padded_tokens));
  }
  return result;
}

double clip_grad_norm(const std::vector<at::Tensor>& parameters, double max_norm) {
  std::vector<at::Tensor> grads;
  grads.reserve(parameters.size());
  for (const at::Tensor& parameter : parameters) {
    if (parameter.grad().defined()) grads.push_back(parameter.grad());
  }
  if (grads.empty()) return 0.0;
  // Every tensor's norm in one call (as torch.nn.utils.clip_grad_norm_), their
  // squares summed in float64; one read of the result.
  const at::Tensor norms = at::stack(at::_foreach_norm(grads)).to(at::kDouble);
  const double norm = std::sqrt(norms.mul(norms).sum().item<double>());
  if (max_norm > 0.0 && std::isfinite(norm) && norm > max_norm) at::_foreach_mul_(grads, max_norm / (norm + 1e-6));
  return norm;
}

}  // namespace ptrain::train
