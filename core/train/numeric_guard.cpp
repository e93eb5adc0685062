#include "core/train/numeric_guard.h"

#include "ptrain/sdk/errors.h"

#include <algorithm>
#include <cmath>

namespace ptrain::train {

sdk::MetricSpec nonfinite_metric_spec() { return {kNonfiniteMetric, sdk::Reduction::kMax}; }

double local_fault(double local_loss, double grad_norm) {
  return std::isfinite(local_loss) && std::isfinite(grad_norm) ? 0.0 : 1.0;
}

NumericGuard::NumericGuard(int64_t max_consecutive_skips, double loss_spike_factor)
    : max_consecutive_skips_(max_consecutive_skips), loss_spike_factor_(loss_spike_factor) {}

NumericGuard::Verdict NumericGuard::on_step(int64_t step, bool fault, double loss) {
  Verdict verdict;
  if (fault) {
    verdict.skip = true;
    ++faults_;
    if (++consecutive_ >= max_consecutive_skips_) {
      throw sdk::Error("step " + std::to_string(step) + ": " + std::to_string(consecutive_) +
                       " consecutive updates had a non-finite loss or gradient norm (train.max_consecutive_skips = " +
                       std::to_string(max_consecutive_skips_) +
                       "); stopping without a checkpoint of this state. Lower optim.lr, check the data, or "
                       "resume from the last checkpoint");
    }
    return verdict;
  }
  consecutive_ = 0;
  if (seen_loss_ && loss_spike_factor_ > 0.0 && running_max_loss_ > 0.0 &&
      loss >= loss_spike_factor_ * running_max_loss_) {
    verdict.spike = true;
    ++spikes_;
    return verdict;  // a spike does not raise the bar for the next one
  }
  running_max_loss_ = seen_loss_ ? std::max(running_max_loss_, loss) : loss;
  seen_loss_ = true;
  return verdict;
}

}  // namespace ptrain::train
