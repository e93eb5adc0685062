// What one update step logs (docs/architecture.md#metrics): the core's figures (loss,
// grad_norm, lr, units, tokens, throughput, mfu, skip counters, epoch) next
// to the plugin's reduced metrics. Every rank computes them; rank 0 sends
// them to metrics.jsonl, TensorBoard and the console (metrics::StepLog).
// Rank 0 also times the steps' phases (core/log/step_phases.h) and, at log
// steps, adds each phase's seconds per step since the last log step as
// `time/<phase>_s` and logs them on one line (docs/monitoring.md).
#pragma once

#include "core/config/run_config.h"
#include "core/dist/communicator.h"
#include "core/log/step_phases.h"
#include "core/metrics/step_log.h"
#include "core/train/eval_samples.h"
#include "core/train/evaluator.h"
#include "core/train/step_reduction.h"
#include "core/train/update_step.h"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

namespace ptrain::train {

struct TrainingRun;

struct StepRecord {
  int64_t step = 0;  // 1-based: the updates completed
  int64_t epoch = 0;
  double lr = 0.0;
  double grad_norm = 0.0;
  const GradientResult* gradient = nullptr;
  const StepTotals* totals = nullptr;
  int64_t skipped_steps = 0;    // over the whole run
  int64_t nonfinite_steps = 0;  // in this invocation
  int64_t loss_spikes = 0;
  const EvalResult* eval = nullptr;  // an evaluation after this step (ran = false: none)
};

// Throws sdk::ConfigError naming the config file and logging.console_metrics
// when it names a metric this run never logs, or one the step line always
// shows (loss, lr, grad_norm, tokens_per_s); the error lists the choices.
void check_console_metrics(const config::RunConfig& config, const sdk::TrainModule& module);

class StepRecorder {
 public:
  // Measures the matmul peak mfu is reported against; rank 0 opens the
  // step log, cutting metrics.jsonl back to the steps a resumed run keeps.
  explicit StepRecorder(const TrainingRun& run);

  // Starts the clocks of a step (and the phase timers at the first).
  void start_step();
  void record(const StepRecord& record);
  // Ends the live progress display and the phase timers; the run's closing lines stay.
  void close();
  double run_seconds() const;

 private:
  // At a log step: `time/<phase>_s` into `values` (the mean over the steps
  // since the last one) and the log line's text; "" at other steps.
  std::string add_phase_times(int64_t step, std::map<std::string, double>& values);

  dist::Communicator& communicator_;
  int64_t num_parameters_;
  double peak_flops_per_s_;
  std::unique_ptr<metrics::StepLog> step_log_;  // rank 0 only
  std::unique_ptr<EvalSamplesFile> eval_samples_;  // rank 0 only
  std::unique_ptr<log::StepPhaseTimer> phases_;  // rank 0 only
  int64_t log_every_ = 1;
  int64_t max_steps_ = 0;
  int64_t steps_since_phases_ = 0;  // steps the phase timers have covered since they were last read
  std::chrono::steady_clock::time_point run_start_;
  std::chrono::steady_clock::time_point step_start_;
  double collective_s_at_start_ = 0.0;
};

}  // namespace ptrain::train
