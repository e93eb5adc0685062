#include "dpo_bco.h"

#include <ATen/ATen.h>

namespace ptrain::dpo {
namespace {

double mean_of(double sum, double count) { return count > 0.0 ? sum / count : 0.0; }

}  // namespace

void BcoRunningMean::add(const at::Tensor& reward_sum, double count) {
  step_sum_ = step_sum_.defined() ? step_sum_ + reward_sum : reward_sum;
  step_count_ += count;
}

void BcoRunningMean::end_step(sdk::Context& ctx) {
  const double step_sum = step_sum_.defined() ? step_sum_.item<double>() : 0.0;
  at::Tensor totals = at::tensor({step_sum, step_count_}, at::kDouble);
  ctx.all_reduce_sum(totals);
  global_sum_ += totals[0].item<double>();
  global_count_ += totals[1].item<double>();
  step_sum_ = at::Tensor();
  step_count_ = 0.0;
  delta_ = mean_of(global_sum_, global_count_);
}

void BcoRunningMean::restore(double global_sum, double global_count) {
  global_sum_ = global_sum;
  global_count_ = global_count;
  delta_ = mean_of(global_sum_, global_count_);
}

}  // namespace ptrain::dpo
