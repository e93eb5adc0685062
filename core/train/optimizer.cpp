#include "core/train/optimizer.h"

#include "core/train/adamw.h"
#include "core/train/optim_compat.h"
#include "ptrain/sdk/errors.h"

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
  std::unique_ptr<AdamW> adamw;                  // optim.name = "adamw"
  std::unique_ptr<torch::optim::Optimizer> sgd;  // optim.name = "sgd"
  std::vector<std::pair<std::string, at::Tensor>> named_parameters;
  // Where each named parameter sits in adamw's groups: {group, index}.
  std::vector<std::pair<size_t, size_t>> adamw_slots;
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
  std::vector<at::Tensor> decayed;
  std::vector<at::Tensor> not_decayed;
  for (const OptimizedTensor& tensor : tensors) {
    impl_->named_parameters.emplace_back(tensor.name, tensor.tensor);
    std::vector<at::Tensor>& group = tensor.decay ? decayed : not_decayed;
    impl_->adamw_slots.emplace_back(tensor.decay ? 0 : 1, group.size());
    group.push_back(tensor.tensor);
  }
  num_decayed_ = static_cast<int64_t>(decayed.size());
  num_not_decayed_ = static_cast<int64_t>(not_decayed.size());

  switch (optim.name) {
    case config::OptimizerKind::kAdamW:
      impl_->adamw = std::make_unique<AdamW>(
          std::vector<AdamW::Group>{{decayed, optim.weight_decay}, {not_decayed, 0.0}},
          AdamWOptions{optim.beta1, optim.beta2, optim.eps});
      break;
    case config::OptimizerKind::kSgd:
      // torch's SGD adds weight decay to the gradient (L2), which for plain
      // SGD is the same update as decoupled decay scaled by lr.
      impl_->sgd = two_groups<torch::optim::SGD>(torch::optim::SGDOptions(optim.lr).momentum(optim.momentum),
                                                 optim.weight_decay, optim.lr, decayed, not_decayed);
      break;
  }
}

ParameterOptimizer::~ParameterOptimizer() = default;

std::vector<std::pair<std::string, at::Tensor>> ParameterOptimizer::state_tensors() const {
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (size_t i = 0; i < impl_->named_parameters.size(); ++i) {
    const auto& [name, parameter] = impl_->named_parameters[i];
    if (impl_->adamw) {
      const AdamW::State& adamw = impl_->adamw->state(impl_->adamw_slots[i].first, impl_->adamw_slots[i].second);
      if (adamw.step == 0) continue;  // never stepped
      tensors.emplace_back(name + ".exp_avg", adamw.exp_avg);
      tensors.emplace_back(name + ".exp_avg_sq", adamw.exp_avg_sq);
      tensors.emplace_back(name + ".step", at::scalar_tensor(adamw.step, at::kLong));
      continue;
    }
    auto& state = impl_->sgd->state();
    const auto found = state.find(optim_compat::state_key(parameter));
    if (found == state.end()) continue;
    const auto& sgd = static_cast<const torch::optim::SGDParamState&>(*found->second);
    if (sgd.momentum_buffer().defined()) tensors.emplace_back(name + ".momentum_buffer", sgd.momentum_buffer());
  }
  return tensors;
}

void ParameterOptimizer::load_state_tensors(const std::vector<std::pair<std::string, at::Tensor>>& tensors) {
  std::map<std::string, at::Tensor> by_name(tensors.begin(), tensors.end());
  const auto take = [&](const std::string& name, const at::Tensor& like) -> at::Tensor {
    const auto found = by_name.find(name);
    if (found == by_name.end()) throw sdk::Error("optimizer state: tensor '" + name + "' is missing");
    // Whole, or flattened when joined from a sharded run's pieces (checkpoint/state_pieces.h).
    if (found->second.numel() != like.numel()) {
      throw sdk::Error("optimizer state: tensor '" + name + "' has the wrong shape");
    }
    // A copy where the parameter is: the checkpoint loads on the host.
    return found->second.reshape(like.sizes()).to(like.options(), /*non_blocking=*/false, /*copy=*/true);
  };
  if (impl_->adamw) {
    for (size_t i = 0; i < impl_->named_parameters.size(); ++i) {
      const auto& [name, parameter] = impl_->named_parameters[i];
      const auto step = by_name.find(name + ".step");
      if (step == by_name.end()) {  // never stepped
        impl_->adamw->set_state(impl_->adamw_slots[i].first, impl_->adamw_slots[i].second, {}, {}, 0);
        continue;
      }
      impl_->adamw->set_state(impl_->adamw_slots[i].first, impl_->adamw_slots[i].second,
                              take(name + ".exp_avg", parameter), take(name + ".exp_avg_sq", parameter),
                              step->second.item<int64_t>());
    }
    return;
  }
  auto& state = impl_->sgd->state();
  state.clear();
  for (const auto& [name, parameter] : impl_->named_parameters) {
    if (by_name.count(name + ".momentum_buffer") == 0) continue;
    auto sgd = std::make_unique<torch::optim::SGDParamState>();
    sgd->momentum_buffer(take(name + ".momentum_buffer", parameter));
    state[optim_compat::state_key(parameter)] = std::move(sgd);
  }
}

void ParameterOptimizer::step(double lr) {
  if (impl_->adamw) {
    impl_->adamw->step(lr);
    return;
  }
  for (auto& group : impl_->sgd->param_groups()) group.options().set_lr(lr);
  impl_->sgd->step();
}

}  // namespace ptrain::train
