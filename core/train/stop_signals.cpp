#include "core/train/stop_signals.h"

#include "core/log/failpoint.h"

namespace ptrain::train {
namespace {

volatile sig_atomic_t g_stop_requested = 0;
void request_stop(int) { g_stop_requested = 1; }

}  // namespace

StopSignals::StopSignals() {
  struct sigaction action {};
  action.sa_handler = request_stop;
  ::sigemptyset(&action.sa_mask);
  ::sigaction(SIGTERM, &action, &previous_term_);
  ::sigaction(SIGUSR1, &action, &previous_usr1_);
}

StopSignals::~StopSignals() {
  ::sigaction(SIGTERM, &previous_term_, nullptr);
  ::sigaction(SIGUSR1, &previous_usr1_, nullptr);
}

bool StopSignals::requested(int64_t step, int rank) const {
  if (failpoint::armed(failpoint::StepFault::kStopRequest, step, rank)) g_stop_requested = 1;
  return g_stop_requested != 0;
}

}  // namespace ptrain::train
