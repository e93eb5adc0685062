// SIGINT and SIGTERM caught while the launcher supervises its workers, so it
// can forward them instead of dying and leaving the workers behind.
#pragma once

#include <signal.h>

namespace ptrain::dist {

// Installs the handlers; the destructor restores the previous ones. One at a
// time per process.
class CaughtSignals {
 public:
  CaughtSignals();
  CaughtSignals(const CaughtSignals&) = delete;
  CaughtSignals& operator=(const CaughtSignals&) = delete;
  ~CaughtSignals();

  // The signal caught since the last call (the latest, if several), or 0.
  int take();

 private:
  struct sigaction previous_int_ {};
  struct sigaction previous_term_ {};
};

}  // namespace ptrain::dist
