// SIGTERM (Slurm preemption, `ptrain launch` passing a stop on) and SIGUSR1
// (sbatch --signal=USR1@T) ask a run to save a checkpoint and exit cleanly at
// the end of the current step. The request is this rank's; the step's metric
// reduction makes it every rank's (step_reduction.h).
//
// No thread that computes ever receives these signals: they are blocked in
// every thread and taken by a watcher thread (dist::WatchedSignals, whose
// header says why oneDNN's GEMM kernels demand it); the loop reads what the
// watcher took at the end of a step.
#pragma once

#include "core/dist/process_signals.h"

#include <atomic>
#include <cstdint>

namespace ptrain::train {

class StopSignals {
 public:
  // Blocks SIGTERM and SIGUSR1 and starts the watcher. Construct it first
  // thing in the command, before anything starts a thread.
  StopSignals() = default;
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // Whether this rank was asked to stop by the end of `step` (1-based): a
  // signal arrived, or the PTRAIN_TEST_STOP_AT failpoint names the step.
  // The first time it sees a signal it logs it (the watcher does not log:
  // it may run before the logger is set up).
  bool requested(int64_t step, int rank) const;

 private:
  dist::WatchedSignals signals_;
  mutable std::atomic<bool> announced_{false};
};

}  // namespace ptrain::train
