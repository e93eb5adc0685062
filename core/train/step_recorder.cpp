#include "core/train/step_recorder.h"

#include "core/metrics/throughput.h"
#include "core/model/gemm_rate.h"
#include "core/train/resume.h"
#include "core/train/step_metric_names.h"
#include "core/train/training_run.h"
#include "core/log/logger.h"
#include "ptrain/sdk/errors.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace ptrain::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// "data 0.012 s (3%) | forward 0.101 s (25%) | ..." for the phases that took any time.
std::string phase_line(const log::PhaseSeconds& per_step) {
  double total = 0.0;
  for (const double seconds : per_step) total += seconds;
  std::string line;
  for (size_t i = 0; i < log::kStepPhaseCount; ++i) {
    if (per_step[i] <= 0.0) continue;
    char text[96];
    std::snprintf(text, sizeof(text), "%s%s %.4g s (%.0f%%)", line.empty() ? "" : " | ",
                  log::step_phase_name(static_cast<log::StepPhase>(i)), per_step[i],
                  total > 0.0 ? 100.0 * per_step[i] / total : 0.0);
    line += text;
  }
  return line;
}

// What the step line always shows, and the core's other figures record() writes.
const std::vector<std::string> kAlwaysShown{step_metric::kLoss, step_metric::kLr, step_metric::kGradNorm,
                                            step_metric::kTokensPerS};
const std::vector<std::string> kCoreFigures{step_metric::kUnits,
                                            step_metric::kTokens,
                                            step_metric::kPaddedTokens,
                                            step_metric::kStepS,
                                            step_metric::kCommS,
                                            step_metric::kMfu,
                                            step_metric::kSkippedSteps,
                                            step_metric::kNonfiniteSteps,
                                            step_metric::kLossSpikes,
                                            step_metric::kEpoch,
                                            step_metric::kForwardTokens,
                                            step_metric::kEvalS,
                                            "eval/tokens"};

}  // namespace

void check_console_metrics(const config::RunConfig& config, const sdk::TrainModule& module) {
  std::vector<std::string> known = kCoreFigures;
  for (const sdk::MetricSpec& spec : step_metric_specs(module)) {
    if (spec.name.rfind("core/", 0) != 0) known.push_back(spec.name);
  }
  for (const std::string& name : eval_metric_names(module, config.eval)) known.push_back(name);
  for (size_t i = 0; i < log::kStepPhaseCount; ++i) {
    known.push_back(std::string("time/") + log::step_phase_name(static_cast<log::StepPhase>(i)) + "_s");
  }
  const std::string where = config.source.string() + ": key 'logging.console_metrics'";
  for (const std::string& name : config.logging.console_metrics) {
    if (std::find(kAlwaysShown.begin(), kAlwaysShown.end(), name) != kAlwaysShown.end()) {
      throw sdk::ConfigError(where + ": \"" + name + "\" is always on the step line; name other metrics");
    }
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    std::string listed;
    for (const std::string& option : known) listed += (listed.empty() ? "" : ", ") + option;
    throw sdk::ConfigError(where + ": \"" + name + "\" is not a metric of this run; it logs " + listed);
  }
}

StepRecorder::StepRecorder(const TrainingRun& run)
    : communicator_(run.communicator),
      num_parameters_(run.num_parameters),
      peak_flops_per_s_(model::measure_gemm_flops_per_s(run.parts.device, run.parts.policy->compute_dtype())),
      run_start_(Clock::now()) {
  if (communicator_.rank() != 0) return;
  const config::RunConfig& config = run.config;
  const std::filesystem::path output_dir = config.output_dir;
  truncate_metrics(output_dir / "metrics.jsonl", run.first_step);
  eval_samples_ = std::make_unique<EvalSamplesFile>(output_dir, run.first_step);
  log_every_ = std::max<int64_t>(1, config.train.log_every);
  max_steps_ = config.train.max_steps;
  phases_ = std::make_unique<log::StepPhaseTimer>(run.parts.device);
  step_log_ = std::make_unique<metrics::StepLog>(
      metrics::StepLogOptions{output_dir, config.logging.tensorboard, run.resolved_config_toml, run.first_step,
                              config.train.max_steps, config.train.log_every, config.logging.console_metrics});
}

void StepRecorder::start_step() {
  if (phases_ && !phases_->active()) phases_->activate();
  step_start_ = Clock::now();
  collective_s_at_start_ = communicator_.collective_seconds();
}

void StepRecorder::record(const StepRecord& record) {
  // An evaluation after the step is not part of its time (eval_s has it).
  const bool evaluated = record.eval != nullptr && record.eval->ran;
  const double eval_s = evaluated ? record.eval->seconds : 0.0;
  const double step_s = seconds_since(step_start_) - eval_s;
  const StepTotals& totals = *record.totals;
  std::map<std::string, double> values;
  if (record.gradient->has_units) {
    values[step_metric::kLoss] = totals.loss;
    values[step_metric::kGradNorm] = record.grad_norm;
  }
  values[step_metric::kLr] = record.lr;
  // The first loss term's units: the plugin's own unit (tokens, sequences, pairs).
  const std::vector<int64_t>& units = record.gradient->global_units;
  values[step_metric::kUnits] = static_cast<double>(units.empty() ? 0 : units.front());
  values[step_metric::kTokens] = static_cast<double>(totals.tokens);
  values[step_metric::kPaddedTokens] = totals.padded_tokens;
  values[step_metric::kStepS] = step_s;
  values[step_metric::kCommS] = communicator_.collective_seconds() - collective_s_at_start_;
  // Forwards a plugin ran without gradients (a reference's, a KL estimate's)
  // are work of the step too: tokens at 2·params FLOPs each, as it reported them.
  if (totals.forward_tokens > 0) values[step_metric::kForwardTokens] = static_cast<double>(totals.forward_tokens);
  values[step_metric::kTokensPerS] = static_cast<double>(totals.tokens + totals.forward_tokens) / step_s;
  values[step_metric::kMfu] = (metrics::training_flops(num_parameters_, totals.tokens) + totals.forward_flops) /
                              step_s / (peak_flops_per_s_ * communicator_.world_size());
  values[step_metric::kSkippedSteps] = static_cast<double>(record.skipped_steps);
  values[step_metric::kNonfiniteSteps] = static_cast<double>(record.nonfinite_steps);
  values[step_metric::kLossSpikes] = static_cast<double>(record.loss_spikes);
  values[step_metric::kEpoch] = static_cast<double>(record.epoch);
  values.insert(totals.plugin_metrics.begin(), totals.plugin_metrics.end());
  if (evaluated) {
    values[step_metric::kEvalS] = eval_s;
    values.insert(record.eval->metrics.begin(), record.eval->metrics.end());
    if (eval_samples_) eval_samples_->append(record.step, record.eval->samples);
  }
  const std::string phases = add_phase_times(record.step, values);
  if (step_log_) step_log_->record(record.step, values);
  if (!phases.empty()) log::info("timing", phases);
}

std::string StepRecorder::add_phase_times(int64_t step, std::map<std::string, double>& values) {
  if (!phases_) return "";
  ++steps_since_phases_;
  if (step % log_every_ != 0 && step != max_steps_) return "";
  // Read at log steps only: on a GPU this is the one wait for the device's marks.
  log::PhaseSeconds per_step = phases_->resolve();
  for (double& seconds : per_step) seconds /= static_cast<double>(steps_since_phases_);
  for (size_t i = 0; i < log::kStepPhaseCount; ++i) {
    values[std::string("time/") + log::step_phase_name(static_cast<log::StepPhase>(i)) + "_s"] = per_step[i];
  }
  const std::string line = "steps " + std::to_string(step - steps_since_phases_ + 1) + "-" + std::to_string(step) +
                           ", per step: " + phase_line(per_step);
  steps_since_phases_ = 0;
  return line;
}

void StepRecorder::close() {
  phases_.reset();
  step_log_.reset();
}

double StepRecorder::run_seconds() const { return seconds_since(run_start_); }

}  // namespace ptrain::train
