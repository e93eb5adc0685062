// The optimizer over the policy's parameters: AdamW (decoupled weight decay)
// or SGD, with norms and biases excluded from weight decay by default, as in
// transformers' Trainer. torch::optim stays behind this header so only one
// translation unit pays for its includes.
#pragma once

#include "core/config/run_config.h"

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ptrain::train {

// One tensor the optimizer updates in place from its .grad.
struct OptimizedTensor {
  std::string name;
  at::Tensor tensor;
  bool decay = true;  // in the weight-decay group
};

// 1-D parameters are norm scales and biases: not decayed unless configured.
bool decays(const config::OptimSection& optim, const at::Tensor& parameter);

class ParameterOptimizer {
 public:
  ParameterOptimizer(const config::OptimSection& optim,
                     const std::vector<std::pair<std::string, at::Tensor>>& named_parameters);
  // Explicit decay groups: for pieces of parameters (sharded data parallel),
  // whose own shape no longer tells a norm from a matrix.
  ParameterOptimizer(const config::OptimSection& optim, const std::vector<OptimizedTensor>& tensors);
  ~ParameterOptimizer();

  // One update with the given learning rate for every parameter group.
  void step(double lr);

  // The optimizer's per-parameter state for checkpoints, named
  // "<parameter>.exp_avg", ".exp_avg_sq", ".step" (AdamW) or
  // ".momentum_buffer" (SGD with momentum). Empty before the first step.
  std::vector<std::pair<std::string, at::Tensor>> state_tensors() const;
  // Restores what state_tensors() returned; throws sdk::Error naming a
  // tensor that is missing or of the wrong shape.
  void load_state_tensors(const std::vector<std::pair<std::string, at::Tensor>>& tensors);

  int64_t num_decayed() const { return num_decayed_; }
  int64_t num_not_decayed() const { return num_not_decayed_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int64_t num_decayed_ = 0;
  int64_t num_not_decayed_ = 0;
};

}  // namespace ptrain::train
