#include "core/train/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace ptrain::train {

double learning_rate_at(const config::ScheduleSection& schedule, double base_lr, int64_t step, int64_t max_steps) {
  if (step < schedule.warmup_steps) {
    return base_lr * static_cast<double>(step + 1) / static_cast<double>(schedule.warmup_steps);
  }
  if (schedule.name == config::ScheduleKind::kConstant) return base_lr;

  const int64_t decay_steps = std::max<int64_t>(1, max_steps - schedule.warmup_steps);
  const double progress =
      std::clamp(static_cast<double>(step - schedule.warmup_steps) / static_cast<double>(decay_steps), 0.0, 1.0);
  const double floor = schedule.min_lr_ratio;
  const double factor = schedule.name == config::ScheduleKind::kLinear ? 1.0 - progress
                                                                        : 0.5 * (1.0 + std::cos(M_PI * progress));
  return base_lr * (floor + (1.0 - floor) * factor);
}

}  // namespace ptrain::train
