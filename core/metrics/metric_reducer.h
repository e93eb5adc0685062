// Reduces named metrics over the microbatches of a step, then over ranks, in
// two collectives (docs/architecture.md#metrics): one SUM of packed sums, counts and weights,
// one MAX of packed maxima and negated minima. Every rank gets the same result.
#pragma once

#include "core/dist/communicator.h"
#include "ptrain/sdk/metrics.h"

#include <map>
#include <string>
#include <vector>

namespace ptrain::metrics {

class MetricReducer {
 public:
  // Throws sdk::PluginError on a duplicate name.
  explicit MetricReducer(std::vector<sdk::MetricSpec> specs);

  // Throws sdk::PluginError naming a metric that was not declared. Values
  // still in tensors are kept as they are until reduce() reads them.
  void add(const sdk::MetricList& metrics);
  void add(const std::string& name, double value, double weight = 1.0);

  // Collective. Reads the step's tensor values in one transfer (the only
  // tensor-to-scalar sync metrics cost a step), then returns every sum (0 when nothing contributed) and every other
  // metric that had a contribution on some rank (a mean of nothing is left
  // out, not reported as NaN), then clears the values for the next step.
  std::map<std::string, double> reduce(dist::Communicator& communicator);

  const std::vector<sdk::MetricSpec>& specs() const { return specs_; }

 private:
  struct Slot {
    double sum = 0.0;     // Σ v, or Σ v·w for weighted_mean
    double weight = 0.0;  // contributions, or Σ w for weighted_mean
    double extreme = 0.0;
  };
  // A tensor contribution, read by read_tensor_values().
  struct TensorValue {
    size_t slot = 0;
    at::Tensor value;        // 0-dim double
    at::Tensor weight;       // 0-dim double, or undefined: weight_value
    double weight_value = 1.0;
  };
  size_t slot_of(const std::string& name) const;
  void add_to_slot(size_t slot, double value, double weight);
  void read_tensor_values();
  void reset();

  std::vector<sdk::MetricSpec> specs_;
  std::map<std::string, size_t> index_;
  std::vector<Slot> slots_;
  std::vector<TensorValue> tensor_values_;
};

}  // namespace ptrain::metrics
