// SIGTERM (Slurm preemption, `ptrain launch` stopping) and SIGUSR1 ask a run
// to save a checkpoint and exit cleanly at the end of the current step. The
// request is this rank's; the step's metric reduction makes it every rank's.
#pragma once

#include <signal.h>

#include <cstdint>

namespace ptrain::train {

class StopSignals {
 public:
  StopSignals();   // installs the handlers
  ~StopSignals();  // restores the previous ones
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // Whether this rank was asked to stop by the time of `step` (1-based).
  bool requested(int64_t step, int rank) const;

 private:
  struct sigaction previous_term_ {};
  struct sigaction previous_usr1_ {};
};

}  // namespace ptrain::train
