#include "core/train/adamw.h"

#include <ATen/ATen.h>
#include <torch/version.h>

#include <cmath>
#include <map>
#include <tuple>
#include <utility>

namespace ptrain::train {
namespace {

#if !(TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4))
// torch::optim::AdamW's sequence, on lists of tensors that share a step count.
void foreach_update(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads,
                    const std::vector<at::Tensor>& exp_avgs, const std::vector<at::Tensor>& exp_avg_sqs, int64_t step,
                    double lr, double weight_decay, const AdamWOptions& options) {
  if (weight_decay != 0.0) at::_foreach_mul_(params, 1.0 - lr * weight_decay);
  const double bias_correction1 = 1.0 - std::pow(options.beta1, static_cast<double>(step));
  const double bias_correction2 = 1.0 - std::pow(options.beta2, static_cast<double>(step));
  at::_foreach_mul_(exp_avgs, options.beta1);
  at::_foreach_add_(exp_avgs, grads, 1.0 - options.beta1);
  at::_foreach_mul_(exp_avg_sqs, options.beta2);
  at::_foreach_addcmul_(exp_avg_sqs, grads, grads, 1.0 - options.beta2);
  std::vector<at::Tensor> denominators = at::_foreach_sqrt(exp_avg_sqs);
  at::_foreach_div_(denominators, std::sqrt(bias_correction2));
  at::_foreach_add_(denominators, options.eps);
  at::_foreach_addcdiv_(params, exp_avgs, denominators, -lr / bias_correction1);
}
#endif

}  // namespace

AdamW::AdamW(std::vector<Group> groups, const AdamWOptions& options)
    : groups_(std::move(groups)), options_(options) {
  for (const Group& group : groups_) states_.emplace_back(group.tensors.size());
}

void AdamW::set_state(size_t group, size_t index, at::Tensor exp_avg, at::Tensor exp_avg_sq, int64_t step) {
  const at::Tensor& tensor = groups_.at(group).tensors.at(index);
  State& state = states_.at(group).at(index);
  if (step == 0) {
    state = State{};
    return;
  }
  // Copies: the caller's tensors (a loaded checkpoint) are not updated in place.
  state.exp_avg = exp_avg.reshape(tensor.sizes()).to(tensor.options(), /*non_blocking=*/false, /*copy=*/true);
  state.exp_avg_sq = exp_avg_sq.reshape(tensor.sizes()).to(tensor.options(), /*non_blocking=*/false, /*copy=*/true);
  state.step = step;
  state.step_tensor = at::full({}, static_cast<double>(step), tensor.options().dtype(at::kFloat));
}

void AdamW::step(double lr) {
  for (size_t g = 0; g < groups_.size(); ++g) {
    // One batch per device and dtype (a group normally has one of each).
    std::map<std::tuple<int, int, int>, Batch> batches;
    for (size_t i = 0; i < groups_[g].tensors.size(); ++i) {
      const at::Tensor& tensor = groups_[g].tensors[i];
      if (!tensor.grad().defined()) continue;
      State& state = states_[g][i];
      if (!state.exp_avg.defined()) {
        state.exp_avg = at::zeros_like(tensor, at::MemoryFormat::Contiguous);
        state.exp_avg_sq = at::zeros_like(tensor, at::MemoryFormat::Contiguous);
        state.step_tensor = at::zeros({}, tensor.options().dtype(at::kFloat));
      }
      Batch& batch = batches[{static_cast<int>(tensor.device().type()), tensor.device().index(),
                              static_cast<int>(tensor.scalar_type())}];
      batch.params.push_back(tensor);
      batch.grads.push_back(tensor.grad());
      batch.exp_avgs.push_back(state.exp_avg);
      batch.exp_avg_sqs.push_back(state.exp_avg_sq);
      batch.steps.push_back(state.step_tensor);
      batch.states.push_back(&state);
    }
    for (auto& [key, batch] : batches) update(batch, lr, groups_[g].weight_decay);
  }
}

void AdamW::update(Batch& batch, double lr, double weight_decay) {
  for (State* state : batch.states) ++state->step;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  // at::_fused_adamw_ (CPU kernels from LibTorch 2.4, CUDA from 2.0) reads
  // the step count from `steps`, on the tensors' device (no host read), but
  // does not advance it: at 0 its bias corrections divide by zero.
  at::_foreach_add_(batch.steps, 1.0);
  at::_fused_adamw_(batch.params, batch.grads, batch.exp_avgs, batch.exp_avg_sqs, /*max_exp_avg_sqs=*/{},
                    batch.steps, lr, options_.beta1, options_.beta2, weight_decay, options_.eps,
                    /*amsgrad=*/false, /*maximize=*/false);
#else
  // The bias corrections depend on the step: one call per step count.
  std::map<int64_t, Batch> by_step;
  for (size_t i = 0; i < batch.params.size(); ++i) {
    Batch& same = by_step[batch.states[i]->step];
    same.params.push_back(batch.params[i]);
    same.grads.push_back(batch.grads[i]);
    same.exp_avgs.push_back(batch.exp_avgs[i]);
    same.exp_avg_sqs.push_back(batch.exp_avg_sqs[i]);
  }
  for (auto& [step, same] : by_step) {
    foreach_update(same.params, same.grads, same.exp_avgs, same.exp_avg_sqs, step, lr, weight_decay, options_);
  }
#endif
}

}  // namespace ptrain::train
