#include "core/log/progress.h"

#include "core/log/logger.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ptrain::log {
namespace {

double fraction_of(int64_t done, int64_t total) {
  return total > 0 ? std::clamp(static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0) : 1.0;
}

std::string counter(int64_t done, int64_t total) { return std::to_string(done) + "/" + std::to_string(total); }

}  // namespace

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto total = static_cast<int64_t>(std::llround(seconds));
  char buffer[32];
  if (total >= 3600) {
    std::snprintf(buffer, sizeof buffer, "%lldh%02lldm", static_cast<long long>(total / 3600),
                  static_cast<long long>(total % 3600 / 60));
  } else if (total >= 60) {
    std::snprintf(buffer, sizeof buffer, "%lldm%02llds", static_cast<long long>(total / 60),
                  static_cast<long long>(total % 60));
  } else {
    std::snprintf(buffer, sizeof buffer, "%llds", static_cast<long long>(total));
  }
  return buffer;
}

std::string format_bar(int64_t done, int64_t total, int width) {
  const double fraction = fraction_of(done, total);
  const int filled = static_cast<int>(std::floor(fraction * width));
  std::string bar = "[" + std::string(static_cast<size_t>(filled), '=');
  if (filled < width) bar += '>' + std::string(static_cast<size_t>(width - filled - 1), ' ');
  char percent[16];
  std::snprintf(percent, sizeof percent, "] %3d%%", static_cast<int>(std::floor(fraction * 100.0)));
  return bar + percent;
}

std::string format_phase_progress(const std::string& label, int64_t done, int64_t total, double elapsed_s) {
  const double fraction = fraction_of(done, total);
  const double eta_s = done > 0 ? elapsed_s / fraction - elapsed_s : NAN;
  return label + " " + counter(done, total) + " " + format_bar(done, total, 20) + " | " + format_duration(elapsed_s) +
         " elapsed | eta " + format_duration(eta_s);
}

std::string format_training_progress(int64_t step, int64_t max_steps, double elapsed_s, double eta_s, double loss,
                                     double lr, double tokens_per_s) {
  char numbers[96];
  std::snprintf(numbers, sizeof numbers, " | loss %.4f | lr %.2e | %.0f tok/s", loss, lr, tokens_per_s);
  return "step " + counter(step, max_steps) + " " + format_bar(step, max_steps, 20) + " | " +
         format_duration(elapsed_s) + " elapsed | eta " + format_duration(eta_s) + numbers;
}

PhaseProgress::PhaseProgress(std::string component, std::string label, int64_t total, StatusLine& status,
                             double line_interval_s)
    : component_(std::move(component)),
      label_(std::move(label)),
      total_(total),
      status_(status),
      line_interval_s_(line_interval_s),
      start_(std::chrono::steady_clock::now()) {
  if (status_.enabled()) status_.show(bar_text());
}

PhaseProgress::~PhaseProgress() {
  // A phase ended by an exception leaves no bar behind and claims no success.
  if (!finished_) status_.clear();
}

double PhaseProgress::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

std::string PhaseProgress::bar_text() const {
  return "[" + component_ + "] " + format_phase_progress(label_, done_, total_, elapsed_s());
}

void PhaseProgress::advance(int64_t count) {
  done_ += count;
  const double elapsed = elapsed_s();
  if (status_.enabled()) {
    status_.show(bar_text());
  } else if (elapsed - last_line_s_ >= line_interval_s_ && done_ < total_) {
    last_line_s_ = elapsed;
    info(component_, format_phase_progress(label_, done_, total_, elapsed));
  }
}

void PhaseProgress::dismiss() {
  finished_ = true;
  status_.clear();
}

void PhaseProgress::finish() {
  if (finished_) return;
  finished_ = true;
  status_.clear();
  info(component_, label_ + ": " + counter(done_, total_) + " in " + format_duration(elapsed_s()));
}

}  // namespace ptrain::log
