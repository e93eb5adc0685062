// AdamW (Loshchilov & Hutter, "Decoupled Weight Decay Regularization",
// ICLR 2019) as torch.optim.AdamW computes it, per tensor p with gradient g
// and step t (1-based):
//
//   p ← p · (1 − lr·wd)
//   m ← β1·m + (1 − β1)·g          v ← β2·v + (1 − β2)·g²
//   p ← p − lr / (1 − β1^t) · m / (√v / √(1 − β2^t) + ε)
//
// over all tensors of a parameter group at once rather than one at a time:
// LibTorch >= 2.4 runs one fused kernel per group (at::_fused_adamw_, one
// pass over p, g, m and v on the CPU and on CUDA, as torch.optim.AdamW(fused=
// True)); older ones the _foreach_ ops in torch::optim::AdamW's order (the
// same values, bit for bit). Tensors without a gradient are skipped, as
// torch::optim skips them; their step count stays.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace ptrain::train {

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
};

class AdamW {
 public:
  struct Group {
    std::vector<at::Tensor> tensors;  // updated in place from their .grad
    double weight_decay = 0.0;
  };
  // A tensor's state: the moments (created at its first step) and its steps.
  struct State {
    at::Tensor exp_avg;
    at::Tensor exp_avg_sq;
    int64_t step = 0;
    at::Tensor step_tensor;  // float32 scalar beside the tensor: the fused kernel's count
  };

  AdamW(std::vector<Group> groups, const AdamWOptions& options);

  // One update at learning rate `lr`.
  void step(double lr);

  // The state of group `group`'s tensor `index`; step 0: never stepped.
  const State& state(size_t group, size_t index) const { return states_.at(group).at(index); }
  // Replaces it with copies of the moments (the tensor's element count) and
  // `step`; step 0 clears it (never stepped).
  void set_state(size_t group, size_t index, at::Tensor exp_avg, at::Tensor exp_avg_sq, int64_t step);
  const std::vector<Group>& groups() const { return groups_; }

 private:
  // The tensors of a group with gradients this step, and their states.
  struct Batch {
    std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs, steps;
    std::vector<State*> states;
  };
  void update(Batch& batch, double lr, double weight_decay);

  std::vector<Group> groups_;
  std::vector<std::vector<State>> states_;  // per group, per tensor
  AdamWOptions options_;
};

}  // namespace ptrain::train
