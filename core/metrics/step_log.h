// Where rank 0 sends each step's reduced metrics: metrics.jsonl, TensorBoard
// event files when logging.tensorboard is on, and the console — a live
// progress bar when stderr is a terminal, plus a log line every log_every steps.
#pragma once

#include "core/log/status_line.h"
#include "core/metrics/metrics_sink.h"
#include "core/metrics/tensorboard_writer.h"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ptrain::metrics {

struct StepLogOptions {
  std::filesystem::path output_dir;
  bool tensorboard = false;
  std::string resolved_config_toml;  // shown in TensorBoard's text tab as "config"
  int64_t first_step = 0;            // steps completed before this invocation (resume)
  int64_t max_steps = 0;
  int64_t log_every = 1;
  std::vector<std::string> console_metrics;  // logging.console_metrics: more of the step on its console line
};

class StepLog {
 public:
  explicit StepLog(const StepLogOptions& options, log::StatusLine& status = log::StatusLine::for_stderr());
  ~StepLog();
  StepLog(const StepLog&) = delete;
  StepLog& operator=(const StepLog&) = delete;

  // `step` counts from 1 (the number of completed updates).
  void record(int64_t step, const std::map<std::string, double>& values);

 private:
  StepLogOptions options_;
  log::StatusLine& status_;
  JsonlMetricsWriter jsonl_;
  std::unique_ptr<TensorBoardWriter> tensorboard_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace ptrain::metrics
