// Named metric values a plugin emits per microbatch, and how they reduce.
//
// The core reduces over microbatches, then over ranks, so every rank ends a
// step with the same globally correct number:
//   sum            Σ v
//   mean           Σ v / number of contributions (each add() is one)
//   max, min       over all contributions
//   weighted_mean  Σ v·w / Σ w (e.g. token accuracy weighted by tokens)
// A plugin declares its metrics once (TrainModule::metric_specs) so that every
// rank packs the same slots even when it had no microbatch this step.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

namespace ptrain::sdk {

enum class Reduction { kSum, kMean, kMax, kMin, kWeightedMean };

const char* reduction_name(Reduction reduction);

struct MetricSpec {
  std::string name;
  Reduction reduction = Reduction::kMean;
};

// One contribution. A value still in a tensor (value_tensor defined) is read
// by the core once per step, after the microbatch loop, together with every
// other tensor value of the step: emitting it costs no tensor-to-scalar sync
// (on a GPU, no wait for the microbatch's kernels).
struct MetricValue {
  std::string name;
  double value = 0.0;
  double weight = 1.0;       // used by weighted_mean only
  at::Tensor value_tensor;   // one element; when defined, replaces value
  at::Tensor weight_tensor;  // one element; when defined, replaces weight
};

class MetricList {
 public:
  void add(std::string name, double value, double weight = 1.0) {
    values_.push_back({std::move(name), value, weight, {}, {}});
  }
  // value (and weight) as one-element tensors on any device, e.g.
  // add("nll", nll_sum / tokens, tokens) with tokens = mask.sum().
  void add(std::string name, const at::Tensor& value, double weight = 1.0);
  void add(std::string name, const at::Tensor& value, const at::Tensor& weight);
  const std::vector<MetricValue>& values() const { return values_; }

 private:
  std::vector<MetricValue> values_;
};

}  // namespace ptrain::sdk
