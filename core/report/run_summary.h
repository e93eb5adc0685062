// What a report says about a run in numbers: each metric's final, lowest and
// highest value, and the run's throughput and skipped steps.
#pragma once

#include "core/report/run_data.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace ptrain::report {

struct MetricSummary {
  int64_t count = 0;  // steps with a finite value
  double final_value = 0.0;
  double min_value = 0.0;
  int64_t min_step = 0;
  double max_value = 0.0;
  int64_t max_step = 0;
};

struct RunSummary {
  int64_t steps = 0;      // lines in metrics.jsonl
  int64_t last_step = 0;  // the "step" of the last line
  int64_t skipped_steps = 0;
  double train_s = 0.0;                          // sum of step_s
  double tokens = 0.0;                           // sum of tokens
  std::optional<double> tokens_per_s;            // tokens / train_s over the run
  std::map<std::string, MetricSummary> metrics;  // metrics without a finite value are left out
};

RunSummary summarize(const RunData& run);

}  // namespace ptrain::report
