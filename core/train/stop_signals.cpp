#include "core/train/stop_signals.h"

#include "core/log/failpoint.h"
#include "core/log/logger.h"

#include <string>

namespace ptrain::train {

bool StopSignals::requested(int64_t step, int rank) const {
  const int signal_number = signals_.first();
  if (signal_number != 0 && !announced_.exchange(true)) {
    log::info("train", std::string("received ") + dist::signal_name(signal_number) + " during step " +
                           std::to_string(step) + ": stopping with a checkpoint");
  }
  return signal_number != 0 || failpoint::armed(failpoint::StepFault::kStopRequest, step, rank);
}

}  // namespace ptrain::train
