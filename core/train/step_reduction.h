// One step's metrics reduced over microbatches and ranks (DESIGN.md §4),
// together with what every rank must agree on before it decides the step:
// the loss L, a stop request and a numeric fault on any rank. The core's
// values ride in the same two collectives as the plugin's metrics and come
// back as typed fields.
#pragma once

#include "core/dist/communicator.h"
#include "core/metrics/metric_reducer.h"
#include "core/train/update_step.h"
#include "ptrain/sdk/train_module.h"

#include <cstdint>
#include <map>
#include <string>

namespace ptrain::train {

struct StepTotals {
  double loss = 0.0;            // L: the sum of every rank's share
  int64_t tokens = 0;           // tokens with content in the global batch
  int64_t forward_tokens = 0;   // tokens plugins ran through forwards without gradients (add_forward_tokens)
  double forward_flops = 0.0;   // their FLOPs
  double padded_tokens = 0.0;   // tokens the forwards computed, padding included
  bool stop_requested = false;  // on some rank
  bool nonfinite = false;       // a non-finite loss share or gradient norm on some rank
  std::map<std::string, double> plugin_metrics;
};

class StepReduction {
 public:
  // Throws sdk::PluginError when a plugin metric takes a name the core writes.
  explicit StepReduction(const sdk::TrainModule& module);

  // Where a step's microbatches add their metrics (accumulate_gradients).
  metrics::MetricReducer& reducer() { return reducer_; }
  // This rank's forward work without gradients in the step (sdk::Context::add_forward_tokens).
  void add_forward_work(int64_t tokens, double flops);

  // Collective: adds this rank's stop request and fault flag, reduces the
  // step and clears the reducer for the next one.
  StepTotals reduce(dist::Communicator& communicator, const GradientResult& gradient, double grad_norm,
                    bool stop_requested);

 private:
  metrics::MetricReducer reducer_;
};

}  // namespace ptrain::train
