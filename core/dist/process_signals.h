// How ptrain's processes take the signals that stop them: the one place that
// installs handlers or blocks signals. SIGTERM and SIGUSR1 ask a run to save
// a checkpoint and exit after its current step
// (docs/checkpoints.md#stopping-sigterm-and-sigusr1); SIGINT (Ctrl-C) ends it.
//
// Two policies, because the processes differ in what their threads do:
//   - CaughtSignals, for a process that computes nothing (`ptrain launch`):
//     plain handlers that note the signal, which its supervising loop reads.
//   - WatchedSignals, for a process that computes (a training rank): no
//     computing thread may ever receive a signal. oneDNN's JIT float32 GEMM
//     kernels (Debian's 2.6.3, and every release up to 3.11) point the stack
//     pointer at a heap buffer while they run; a signal delivered to a thread
//     inside one writes its signal frame there, into the heap, whatever the
//     handler does, and the process later aborts in free() ("corrupted size
//     vs. prev_size") or crashes (oneDNN issue 4845). So the signals are
//     blocked in the calling thread, which must be the process's only
//     thread: every thread started later (OpenMP's, Gloo's, a plugin's)
//     inherits the mask, and one watcher thread, which never computes, takes
//     them with sigtimedwait.
// The launcher's handlers do not pass to its workers (exec resets them),
// whereas a blocked mask would: that is one more reason the launcher does
// not block them.
#pragma once

#include <signal.h>

#include <atomic>
#include <thread>

namespace ptrain::dist {

// The signals that ask for a stop with a checkpoint.
inline constexpr int kStopSignals[] = {SIGTERM, SIGUSR1};

// "SIGTERM", "SIGUSR1" or "SIGINT", for log lines.
const char* signal_name(int signal_number);

// SIGINT and the stop signals, caught by handlers for the rest of the
// process: a signal that comes while the launcher reports and exits must
// not end it with 128 + the signal number after its workers stopped
// cleanly. One per process.
class CaughtSignals {
 public:
  CaughtSignals();
  CaughtSignals(const CaughtSignals&) = delete;
  CaughtSignals& operator=(const CaughtSignals&) = delete;

  // A signal caught since it was last taken, or 0 when none is: each of the
  // three once however often it came, SIGINT first.
  int take();
};

// The stop signals, blocked and taken by a watcher thread. A signal sent
// before the constructor has its default action (the process ends).
class WatchedSignals {
 public:
  // Blocks the stop signals in the calling thread and starts the watcher.
  // Construct it first thing, before anything starts a thread. Throws
  // sdk::Error when the signals cannot be blocked.
  WatchedSignals();
  // Ends the watcher. The signals stay blocked, so one that arrives while
  // the process exits finds it already stopping instead of ending it with
  // 128 + the signal number.
  ~WatchedSignals();
  WatchedSignals(const WatchedSignals&) = delete;
  WatchedSignals& operator=(const WatchedSignals&) = delete;

  // The first signal the watcher took, 0 before any.
  int first() const { return received_; }

 private:
  void watch();

  sigset_t signals_{};
  std::atomic<int> received_{0};
  std::atomic<bool> closing_{false};
  std::thread watcher_;
};

}  // namespace ptrain::dist
