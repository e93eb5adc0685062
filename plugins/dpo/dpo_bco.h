// bco_pair's δ (dpo_loss.h): the mean reward, chosen and rejected in their
// sum form, of every pair of all earlier steps on all ranks. It is held
// fixed within a step, so that the step's loss stays a sum over pairs and
// does not depend on the split; end_step folds the step's rewards in.
#pragma once

#include "ptrain/sdk/context.h"

#include <ATen/core/Tensor.h>

namespace ptrain::dpo {

class BcoRunningMean {
 public:
  double delta() const { return delta_; }

  // A microbatch's rewards on this rank: their sum, a detached scalar kept as
  // a tensor until end_step (a read here would wait for the microbatch on a
  // GPU), and how many rewards it sums.
  void add(const at::Tensor& reward_sum, double count);

  // Folds this step's rewards of every rank into δ with one all_reduce_sum,
  // so that the state a checkpoint saves after the step is complete.
  // Collective: every rank calls it once per step.
  void end_step(sdk::Context& ctx);

  // What a checkpoint keeps: the sums over all finished steps and ranks.
  double global_sum() const { return global_sum_; }
  double global_count() const { return global_count_; }
  void restore(double global_sum, double global_count);

 private:
  double delta_ = 0.0;
  at::Tensor step_sum_;  // this rank, this step (undefined: 0)
  double step_count_ = 0.0;
  double global_sum_ = 0.0;  // all ranks, all finished steps
  double global_count_ = 0.0;
};

}  // namespace ptrain::dpo
