// Progress of long phases: a bar on the status line when stderr is a
// terminal, plain log lines at most every `line_interval_s` otherwise (CI and
// Slurm logs), and a closing line with the time the phase took.
#pragma once

#include "core/log/status_line.h"

#include <chrono>
#include <cstdint>
#include <string>

namespace ptrain::log {

// "1h02m", "3m07s", "12s"
std::string format_duration(double seconds);

// "[=========>          ] 45%" with `width` cells between the brackets.
std::string format_bar(int64_t done, int64_t total, int width);

// "reference log-probs 120/400 [=====>              ]  30% | 5s elapsed | eta 12s"
std::string format_phase_progress(const std::string& label, int64_t done, int64_t total, double elapsed_s);

// The training bar: "step 12/300 [==>   ] 4% | 12s elapsed | eta 4m48s | loss 2.3411 | lr 1.00e-03 | 5123 tok/s".
std::string format_training_progress(int64_t step, int64_t max_steps, double elapsed_s, double eta_s, double loss,
                                     double lr, double tokens_per_s);

// One phase. Only rank 0 shows anything: the status line is enabled on rank 0
// alone and other ranks log no info lines.
class PhaseProgress {
 public:
  PhaseProgress(std::string component, std::string label, int64_t total, StatusLine& status = StatusLine::for_stderr(),
                double line_interval_s = 10.0);
  ~PhaseProgress();
  PhaseProgress(const PhaseProgress&) = delete;
  PhaseProgress& operator=(const PhaseProgress&) = delete;

  void advance(int64_t count = 1);
  // Logs "<label>: N/N in 3s" once; the destructor calls it if nobody did.
  void finish();
  // Clears the bar without that line: for phases that recur every step
  // (GRPO's rollouts), whose line would drown the step lines.
  void dismiss();

 private:
  double elapsed_s() const;
  std::string bar_text() const;  // as the status line shows it, "[component] " first

  std::string component_;
  std::string label_;
  int64_t total_;
  int64_t done_ = 0;
  StatusLine& status_;
  double line_interval_s_;
  std::chrono::steady_clock::time_point start_;
  double last_line_s_ = 0.0;
  bool finished_ = false;
};

}  // namespace ptrain::log
