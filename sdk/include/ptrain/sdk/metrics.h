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

struct MetricValue {
  std::string name;
  double value = 0.0;
  double weight = 1.0;  // used by weighted_mean only
};

class MetricList {
 public:
  void add(std::string name, double value, double weight = 1.0) { values_.push_back({std::move(name), value, weight}); }
  const std::vector<MetricValue>& values() const { return values_; }

 private:
  std::vector<MetricValue> values_;
};

// Adds the mean of a per-row value ([rows], e.g. one value per pair or per
// completion) as a weighted_mean metric with the row count as its weight, so
// uneven microbatches and ranks reduce to the exact mean over the global
// batch's rows (DESIGN.md §4). Adds nothing for zero rows.
void add_row_mean(MetricList& metrics, const std::string& name, const at::Tensor& per_row);

}  // namespace ptrain::sdk
