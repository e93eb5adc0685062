#include "core/report/run_summary.h"

#include <cmath>

namespace ptrain::report {
namespace {

double sum_of(const RunData& run, const std::string& name) {
  const auto found = run.metrics.find(name);
  if (found == run.metrics.end()) return 0.0;
  double sum = 0.0;
  for (const auto& value : found->second) {
    if (value && std::isfinite(*value)) sum += *value;
  }
  return sum;
}

}  // namespace

RunSummary summarize(const RunData& run) {
  RunSummary summary;
  summary.steps = static_cast<int64_t>(run.steps.size());
  if (!run.steps.empty()) summary.last_step = run.steps.back();
  for (const auto& [name, series] : run.metrics) {
    MetricSummary metric;
    for (size_t i = 0; i < series.size(); ++i) {
      if (!series[i] || !std::isfinite(*series[i])) continue;
      const double value = *series[i];
      const int64_t step = run.steps[i];
      if (metric.count == 0 || value < metric.min_value) {
        metric.min_value = value;
        metric.min_step = step;
      }
      if (metric.count == 0 || value > metric.max_value) {
        metric.max_value = value;
        metric.max_step = step;
      }
      metric.final_value = value;
      ++metric.count;
    }
    if (metric.count > 0) summary.metrics[name] = metric;
  }
  const auto skipped = summary.metrics.find("skipped_steps");
  if (skipped != summary.metrics.end()) summary.skipped_steps = static_cast<int64_t>(skipped->second.final_value);
  summary.train_s = sum_of(run, "step_s");
  summary.tokens = sum_of(run, "tokens");
  if (summary.train_s > 0.0) summary.tokens_per_s = summary.tokens / summary.train_s;
  return summary;
}

}  // namespace ptrain::report
