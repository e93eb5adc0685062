#include "core/metrics/step_log.h"

#include "core/log/logger.h"
#include "core/log/progress.h"

#include <cmath>
#include <sstream>

namespace ptrain::metrics {
namespace {

// Markdown that shows `text` verbatim (an indented code block).
std::string as_markdown_code(const std::string& text) {
  std::istringstream lines(text);
  std::string line;
  std::string markdown;
  while (std::getline(lines, line)) markdown += "    " + line + "\n";
  return markdown;
}

double value_or_nan(const std::map<std::string, double>& values, const std::string& name) {
  const auto found = values.find(name);
  return found == values.end() ? NAN : found->second;
}

}  // namespace

StepLog::StepLog(const StepLogOptions& options, log::StatusLine& status)
    : options_(options),
      status_(status),
      jsonl_(options.output_dir / "metrics.jsonl"),
      start_(std::chrono::steady_clock::now()) {
  if (options_.tensorboard) {
    require_tensorboard_available();
    tensorboard_ = std::make_unique<TensorBoardWriter>(options_.output_dir);
    tensorboard_->add_text(options_.first_step, "config", as_markdown_code(options_.resolved_config_toml));
    log::info("metrics", "TensorBoard events in " + tensorboard_->path().string());
  }
}

StepLog::~StepLog() { status_.clear(); }

void StepLog::record(int64_t step, const std::map<std::string, double>& values) {
  jsonl_.write(step, values);
  if (tensorboard_) tensorboard_->add_scalars(step, values);

  const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double eta_s =
      elapsed_s / static_cast<double>(step - options_.first_step) * static_cast<double>(options_.max_steps - step);
  if (step % options_.log_every == 0 || step == options_.max_steps) {
    log::info("train", format_console_line(step, options_.max_steps, values, eta_s, options_.console_metrics));
  }
  status_.show(log::format_training_progress(step, options_.max_steps, elapsed_s, eta_s, value_or_nan(values, "loss"),
                                             value_or_nan(values, "lr"), value_or_nan(values, "tokens_per_s")));
}

}  // namespace ptrain::metrics
