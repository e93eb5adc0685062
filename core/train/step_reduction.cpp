#include "core/train/step_reduction.h"

#include "core/log/step_phases.h"
#include "core/train/numeric_guard.h"

namespace ptrain::train {
namespace {

constexpr const char* kStopMetric = "core/stop_requested";
constexpr const char* kNonfiniteMetric = "core/nonfinite";
constexpr const char* kForwardTokensMetric = "core/forward_tokens";
constexpr const char* kForwardFlopsMetric = "core/forward_flops";

std::vector<sdk::MetricSpec> reduction_specs(const sdk::TrainModule& module) {
  std::vector<sdk::MetricSpec> specs = step_metric_specs(module);
  specs.push_back({kStopMetric, sdk::Reduction::kMax});
  specs.push_back({kNonfiniteMetric, sdk::Reduction::kMax});
  specs.push_back({kForwardTokensMetric, sdk::Reduction::kSum});
  specs.push_back({kForwardFlopsMetric, sdk::Reduction::kSum});
  return specs;
}

}  // namespace

StepReduction::StepReduction(const sdk::TrainModule& module) : reducer_(reduction_specs(module)) {}

void StepReduction::add_forward_work(int64_t tokens, double flops) {
  reducer_.add(kForwardTokensMetric, static_cast<double>(tokens));
  reducer_.add(kForwardFlopsMetric, flops);
}

StepTotals StepReduction::reduce(dist::Communicator& communicator, const GradientResult& gradient, double grad_norm,
                                 bool stop_requested) {
  const log::PhaseScope phase(log::StepPhase::kCollectives);
  reducer_.add(kStopMetric, stop_requested ? 1.0 : 0.0);
  reducer_.add(kNonfiniteMetric, local_fault(gradient.local_loss, grad_norm) ? 1.0 : 0.0);
  std::map<std::string, double> reduced = reducer_.reduce(communicator);

  // Sums are always present; every rank adds both flags.
  StepTotals totals;
  totals.loss = reduced.at(kLossMetric);
  totals.tokens = static_cast<int64_t>(reduced.at(kTokensMetric));
  totals.padded_tokens = reduced.at(kPaddedTokensMetric);
  totals.forward_tokens = static_cast<int64_t>(reduced.at(kForwardTokensMetric));
  totals.forward_flops = reduced.at(kForwardFlopsMetric);
  totals.stop_requested = reduced.at(kStopMetric) > 0.0;
  totals.nonfinite = reduced.at(kNonfiniteMetric) > 0.0;
  for (auto& [name, value] : reduced) {
    if (name.rfind("core/", 0) != 0) totals.plugin_metrics.emplace(name, value);
  }
  return totals;
}

}  // namespace ptrain::train
