#include "core/train/optimizer.h"

#include "core/train/optim_compat.h"
#include "ptrain/sdk/errors.h"

#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <map>

namespace ptrain::train {

namespace {

using Parameters = std::vector<at::Tensor>;

// Two parameter groups: `decayed` with the configured weight decay, the rest without.
template <class Optimizer, class Options>
std::unique_ptr<torch::optim::Optimizer> two_groups(const Options& options, double weight_decay, double lr,
                                                    const Parameters& decayed, const Parameters& not_decayed) {
  const auto with_decay = [&](double decay) {
    auto group_options = std::make_unique<Options>(options);
    group_options->weight_decay(decay);
    return group_options;
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decayed, with_decay(weight_decay));
  groups.emplace_back(not_decayed, with_decay(0.0));
  return std::make_unique<Optimizer>(groups, Options(lr));
}

}  // namespace

struct ParameterOptimizer::Impl {
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::vector<std::pair<std::string, at::Tensor>> named_parameters;
  bool is_adamw = false;
};

bool decays(const config::OptimSection& optim, const at::Tensor& parameter) {
  return optim.decay_norms_and_biases || parameter.dim() >= 2;
}

namespace {

std::vector<OptimizedTensor> with_decay_flags(const config::OptimSection& optim,
                                              const std::vector<std::pair<std::string, at::Tensor>>& named) {
  std::vector<OptimizedTensor> tensors;
  for (const auto& [name, parameter] : named) tensors.push_back({name, parameter, decays(optim, parameter)});
  return tensors;
}

}  // namespace

ParameterOptimizer::ParameterOptimizer(const config::OptimSection& optim,
                                       const std::vector<std::pair<std::string, at::Tensor>>& named_parameters)
    : ParameterOptimizer(optim, with_decay_flags(optim, named_parameters)) {}

ParameterOptimizer::ParameterOptimizer(const config::OptimSection& optim, const std::vector<OptimizedTensor>& tensors)
    : impl_(std::make_unique<Impl>()) {
  impl_->is_adamw = optim.name == config::OptimizerKind::kAdamW;
  std::vector<at::Tensor> decayed;
  std::vector<at::Tensor> not_decayed;
  for (const OptimizedTensor& tensor : tensors) {
    impl_->named_parameters.emplace_back(tensor.name, tensor.tensor);
    (tensor.decay ? decayed : not_decayed).push_back(tensor.tensor);
  }
  num_decayed_ = static_cast<int64_t>(decayed.size());
  num_not_decayed_ = static_cast<int64_t>(not_decayed.size());

  switch (optim.name) {
    case config::OptimizerKind::kAdamW:
      impl_->optimizer = two_groups<torch::optim::AdamW>(
          torch::optim::AdamWOptions(optim.lr).betas({optim.beta1, optim.beta2}).eps(optim.eps), optim.weight_decay,
          optim.lr, decayed, not_decayed);
      break;
    case config::OptimizerKind::kSgd:
      // torch's SGD adds weight decay to the gradient (L2), which for plain
      // SGD is the same update as decoupled decay scaled by lr.
      impl_->optimizer = two_groups<torch::optim::SGD>(torch::optim::SGDOptions(optim.lr).momentum(optim.momentum),
                                                       optim.weight_decay, optim.lr, decayed, not_decayed);
      break;
  }
}

ParameterOptimizer::~ParameterOptimizer() = default;

std::vector<std::pair<std::string, at::Tensor>> ParameterOptimizer::state_tensors() const {
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  auto& state = impl_->optimizer->state();
  for (const auto& [name, parameter] : impl_->named_parameters) {
    const auto found = state.find(optim_compat::state_key(parameter));
    if (found == state.end()) continue;
    if (impl_->is_adamw) {
      const auto& adamw = static_cast<const torch::optim::AdamWParamState&>(*found->second);
      tensors.emplace_back(name + ".exp_avg", adamw.exp_avg());
      tensors.emplace_back(name + ".exp_avg_sq", adamw.exp_avg_sq());
      tensors.emplace_back(name + ".step", at::scalar_tensor(adamw.step(), at::kLong));
    } else {
      const auto& sgd = static_cast<const torch::optim::SGDParamState&>(*found->second);
      if (sgd.momentum_buffer().defined()) tensors.emplace_back(name + ".momentum_buffer", sgd.momentum_buffer());
    }
  }
  return tensors;
}

void ParameterOptimizer::load_state_tensors(const std::vector<std::pair<std::string, at::Tensor>>& tensors) {
  std::map<std::string, at::Tensor> by_name(tensors.begin(), tensors.end());
  const auto take = [&](const std::string& name, const at::Tensor& like) -> at::Tensor {
    const auto found = by_name.find(name);
    if (found == by_name.end()) throw sdk::Error("optimizer state: tensor '" + name + "' is missing");
    if (!like.defined()) return found->second.clone();
    // Whole, or flattened when joined from a sharded run's pieces (checkpoint/state_pieces.h).
    if (found->second.numel() != like.numel()) {
      throw sdk::Error("optimizer state: tensor '" + name + "' has the wrong shape");
    }
    // A copy where the parameter is: the checkpoint loads on the host.
    return found->second.reshape(like.sizes()).to(like.options(), /*non_blocking=*/false, /*copy=*/true);
  };
  auto& state = impl_->optimizer->state();
  state.clear();
  for (const auto& [name, parameter] : impl_->named_parameters) {
    if (impl_->is_adamw) {
      if (by_name.count(name + ".step") == 0) continue;  // never stepped
      auto adamw = std::make_unique<torch::optim::AdamWParamState>();
      adamw->step(take(name + ".step", at::Tensor()).item<int64_t>());
      adamw->exp_avg(take(name + ".exp_avg", parameter));
      adamw->exp_avg_sq(take(name + ".exp_avg_sq", parameter));
      state[optim_compat::state_key(parameter)] = std::move(adamw);
    } else if (by_name.count(name + ".momentum_buffer") != 0) {
      auto sgd = std::make_unique<torch::optim::SGDParamState>();
      sgd->momentum_buffer(take(name + ".momentum_buffer", parameter));
      state[optim_compat::state_key(parameter)] = std::move(sgd);
    }
  }
}

void ParameterOptimizer::step(double lr) {
  for (auto& group : impl_->optimizer->param_groups()) group.options().set_lr(lr);
  impl_->optimizer->step();
}

}  // namespace ptrain::train
