// Learning rate per optimizer step: linear warmup, then constant, linear or
// cosine decay to min_lr_ratio·lr at max_steps.
#pragma once

#include "core/config/run_config.h"

#include <cstdint>

namespace ptrain::train {

// `step` is 0-based. Warmup reaches the full rate at step warmup_steps-1
// (lr·(step+1)/warmup_steps), so no update is wasted at lr 0 as with
// schedules that start from 0 (transformers' get_*_schedule_with_warmup).
double learning_rate_at(const config::ScheduleSection& schedule, double base_lr, int64_t step, int64_t max_steps);

}  // namespace ptrain::train
