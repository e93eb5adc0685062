#include "core/train/stop_signals.h"

#include "core/log/failpoint.h"
#include "core/log/logger.h"
#include "ptrain/sdk/errors.h"

#include <cerrno>
#include <cstring>
#include <ctime>
#include <string>

namespace ptrain::train {
namespace {

// How often the watcher looks up from its wait to see whether it should end.
constexpr long kWatchSliceNs = 100L * 1000 * 1000;

}  // namespace

StopSignals::StopSignals() {
  ::sigemptyset(&signals_);
  ::sigaddset(&signals_, SIGTERM);
  ::sigaddset(&signals_, SIGUSR1);
  const int error = ::pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
  if (error != 0) throw sdk::Error(std::string("cannot block SIGTERM and SIGUSR1: ") + std::strerror(error));
  watcher_ = std::thread([this] { watch(); });
}

StopSignals::~StopSignals() {
  closing_ = true;
  watcher_.join();
}

void StopSignals::watch() {
  const timespec slice{0, kWatchSliceNs};
  while (!closing_) {
    const int signal_number = ::sigtimedwait(&signals_, nullptr, &slice);
    if (signal_number <= 0) continue;  // the slice ended (EAGAIN), or EINTR
    int none = 0;
    received_.compare_exchange_strong(none, signal_number);  // the first one is the one to tell
  }
}

bool StopSignals::requested(int64_t step, int rank) const {
  const int signal_number = received_;
  if (signal_number != 0 && !announced_.exchange(true)) {
    log::info("train", std::string("received ") + (signal_number == SIGTERM ? "SIGTERM" : "SIGUSR1") + " during step " +
                           std::to_string(step) + ": stopping with a checkpoint");
  }
  return signal_number != 0 || failpoint::armed(failpoint::StepFault::kStopRequest, step, rank);
}

}  // namespace ptrain::train
