// Numeric faults of an update step: a non-finite loss or gradient norm skips
// the optimizer step on every rank, too many in a row abort the run, and a
// loss far above every earlier one is flagged. Every rank decides from the
// same reduced values (StepTotals), so every rank takes the same branch.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace ptrain::train {

// Whether this rank's loss share or the gradient norm it computed is not
// finite; reduced with MAX over ranks.
bool local_fault(double local_loss, double grad_norm);

class NumericGuard {
 public:
  NumericGuard(int64_t max_consecutive_skips, double loss_spike_factor);

  struct Verdict {
    bool skip = false;   // do not apply the optimizer step
    bool spike = false;  // loss >= factor × the largest earlier loss
  };

  // Called once per step on every rank with the reduced fault flag and loss.
  // Throws sdk::Error when the step makes max_consecutive_skips faults in a row.
  Verdict on_step(int64_t step, bool fault, double loss);

  // The step's decision (1-based step): false skips its update, which a step
  // with no loss unit anywhere (nothing to learn from) also does. Logs why.
  bool apply_update(int64_t step, bool has_units, bool fault, double loss);

  int64_t faults() const { return faults_; }
  int64_t spikes() const { return spikes_; }

  // The counters and the running maximum loss, for a checkpoint
  // (checkpoint::TrainerState::numeric_guard), and back: a resumed run goes
  // on counting and comparing losses as the run it continues would have.
  // restore() throws sdk::Error naming `source` for a malformed record; a
  // null one (a checkpoint from before it was saved) starts them afresh.
  nlohmann::json state() const;
  void restore(const nlohmann::json& state, const std::string& source);
  // restore()'s checks alone, for a resume to refuse a damaged record before
  // it touches the run directory.
  static void check_record(const nlohmann::json& state, const std::string& source);

 private:
  struct Record {
    int64_t consecutive_faults = 0, nonfinite_steps = 0, loss_spikes = 0;
    double running_max_loss = 0.0;
    bool seen_loss = false;
  };
  static Record read_record(const nlohmann::json& state, const std::string& source);

  int64_t max_consecutive_skips_;
  double loss_spike_factor_;
  int64_t consecutive_ = 0;
  int64_t faults_ = 0;
  int64_t spikes_ = 0;
  double running_max_loss_ = 0.0;
  bool seen_loss_ = false;
};

}  // namespace ptrain::train
