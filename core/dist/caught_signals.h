// SIGINT, SIGTERM and SIGUSR1 caught while the launcher supervises its
// workers, so it can pass them on instead of dying and leaving the workers
// behind. The launcher computes nothing, so a plain handler is safe here
// (the workers take theirs differently: core/train/stop_signals.h).
#pragma once

#include <signal.h>

namespace ptrain::dist {

// Installs the handlers for the rest of the process: a signal that comes
// while the launcher reports and exits must not end it with 128 + the
// signal number after its workers stopped cleanly. One per process.
class CaughtSignals {
 public:
  CaughtSignals();
  CaughtSignals(const CaughtSignals&) = delete;
  CaughtSignals& operator=(const CaughtSignals&) = delete;

  // A signal caught since it was last taken, or 0 when none is: each of the
  // three once however often it came, SIGINT first.
  int take();
};

}  // namespace ptrain::dist
