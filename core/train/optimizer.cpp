#include "core/train/optimizer.h"

#include "ptrain/sdk/errors.h"

#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

namespace ptrain::train {

struct ParameterOptimizer::Impl {
  std::unique_ptr<torch::optim::Optimizer> optimizer;
};

ParameterOptimizer::ParameterOptimizer(const config::OptimSection& optim,
                                       const std::vector<std::pair<std::string, at::Tensor>>& named_parameters)
    : impl_(std::make_unique<Impl>()) {
  std::vector<at::Tensor> decayed;
  std::vector<at::Tensor> not_decayed;
  for (const auto& [name, parameter] : named_parameters) {
    // 1-D parameters are norm scales and biases.
    const bool decay = optim.decay_norms_and_biases || parameter.dim() >= 2;
    (decay ? decayed : not_decayed).push_back(parameter);
  }
  num_decayed_ = static_cast<int64_t>(decayed.size());
  num_not_decayed_ = static_cast<int64_t>(not_decayed.size());

  if (optim.name == "adamw") {
    const auto options = [&](double weight_decay) {
      return std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(optim.lr)
                                                              .betas({optim.beta1, optim.beta2})
                                                              .eps(optim.eps)
                                                              .weight_decay(weight_decay));
    };
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(decayed, options(optim.weight_decay));
    groups.emplace_back(not_decayed, options(0.0));
    impl_->optimizer = std::make_unique<torch::optim::AdamW>(groups, torch::optim::AdamWOptions(optim.lr));
  } else if (optim.name == "sgd") {
    // torch's SGD adds weight decay to the gradient (L2), which for plain SGD
    // is the same update as decoupled decay scaled by lr.
    const auto options = [&](double weight_decay) {
      return std::make_unique<torch::optim::SGDOptions>(
          torch::optim::SGDOptions(optim.lr).momentum(optim.momentum).weight_decay(weight_decay));
    };
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(decayed, options(optim.weight_decay));
    groups.emplace_back(not_decayed, options(0.0));
    impl_->optimizer = std::make_unique<torch::optim::SGD>(groups, torch::optim::SGDOptions(optim.lr));
  } else {
    throw sdk::ConfigError("optim.name: unknown optimizer '" + optim.name + "' (expected adamw or sgd)");
  }
}

ParameterOptimizer::~ParameterOptimizer() = default;

void ParameterOptimizer::step(double lr) {
  for (auto& group : impl_->optimizer->param_groups()) group.options().set_lr(lr);
  impl_->optimizer->step();
}

}  // namespace ptrain::train
