// SIGTERM (Slurm preemption, `ptrain launch` passing a stop on) and SIGUSR1
// (sbatch --signal=USR1@T) ask a run to save a checkpoint and exit cleanly at
// the end of the current step. The request is this rank's; the step's metric
// reduction makes it every rank's (step_reduction.h).
//
// No thread that computes ever receives these signals. oneDNN's JIT float32
// GEMM kernels (Debian's 2.6.3, and every release up to 3.11) point the
// stack pointer at a heap buffer while they run; a signal delivered to a
// thread inside one writes its signal frame there, into the heap, whatever
// the handler does, and the process later aborts in free() ("corrupted size
// vs. prev_size") or crashes (oneDNN issue 4845). So the constructor blocks
// both signals in the calling thread, which must be the process's only
// thread: every thread started later (OpenMP's, Gloo's, a plugin's)
// inherits the mask, and one watcher thread, which never computes, takes
// them with sigtimedwait and sets the flag the loop reads at the end of a
// step. A signal sent before the constructor has its default action (the
// process ends; no step has run yet).
#pragma once

#include <signal.h>

#include <atomic>
#include <cstdint>
#include <thread>

namespace ptrain::train {

class StopSignals {
 public:
  // Blocks SIGTERM and SIGUSR1 and starts the watcher. Construct it first
  // thing in the command, before anything starts a thread.
  StopSignals();
  // Ends the watcher. The signals stay blocked, so one that arrives while
  // the process exits finds it already stopping instead of ending it with
  // 128 + the signal number after its checkpoint.
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // Whether this rank was asked to stop by the end of `step` (1-based): a
  // signal arrived, or the PTRAIN_TEST_STOP_AT failpoint names the step.
  // The first time it sees a signal it logs it (the watcher does not log:
  // it may run before the logger is set up).
  bool requested(int64_t step, int rank) const;

 private:
  void watch();

  sigset_t signals_{};
  std::atomic<int> received_{0};  // the first signal taken, 0 before
  mutable std::atomic<bool> announced_{false};
  std::atomic<bool> closing_{false};
  std::thread watcher_;
};

}  // namespace ptrain::train
