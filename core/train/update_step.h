// The gradient of one global batch (docs/architecture.md#the-update-step), for a loss of terms j:
//
//   n_j[r,k] = count_units(microbatch k on rank r)[j]    before any forward
//   N_j      = Σ_r Σ_k n_j[r,k]                           one all-reduce for all terms
//   for each k: backward(Σ_j S_j[r,k] / divisor_j(N_j))   divisor N_j, or 1 (TermDivisor)
//   all-reduce gradients with SUM once, during and after the last
//   microbatch's backward (dist::GradientSynchronizer; reduce-scatter into
//   each rank's shard under distributed.sharding = "optimizer", same sum)
// so the step's gradient, ∇ Σ_j ΣS_j / divisor_j, is the same for every
// split of the global batch over ranks, microbatch sizes and accumulation
// counts. A term with N_j = 0 adds nothing.
#pragma once

#include "core/dist/communicator.h"
#include "core/dist/gradient_sync.h"
#include "core/metrics/metric_reducer.h"
#include "core/shard/sharded_layers.h"
#include "ptrain/sdk/train_module.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ptrain::train {

// What one rank's update steps work with; the same for every step of a run.
struct StepParts {
  sdk::TrainModule& module;
  std::string plugin_name;  // named in errors about the plugin's loss terms
  sdk::Context& context;
  const std::vector<at::Tensor>& parameters;
  dist::Communicator& communicator;
  dist::GradientSynchronizer& grad_sync;
  shard::ShardedLayers* sharded_layers = nullptr;  // sharding "full": the decoder layers' gradient shards
};

struct GradientResult {
  bool has_units = false;            // false: nothing to learn from anywhere; gradients are zero
  std::vector<int64_t> global_units;  // N_j, one per loss term
  int64_t num_microbatches = 0;       // on this rank
  double local_loss = 0.0;            // this rank's share of L (what it adds to core/loss)
};

// The core metrics accumulate_gradients() adds to a step's reduction.
inline constexpr const char* kLossMetric = "core/loss";  // this rank's share of L: the reduced sum is L exactly
inline constexpr const char* kTokensMetric = "core/tokens";
inline constexpr const char* kPaddedTokensMetric = "core/padded_tokens";

// The metrics a step reduces: the core's above, loss/<term> for each loss
// term (its share of L) when there are several, then the plugin's. Throws sdk::PluginError when a
// plugin metric takes a name the core writes (loss, grad_norm, loss/<term>,
// ...) or two terms share a name.
std::vector<sdk::MetricSpec> step_metric_specs(const sdk::TrainModule& module);

// Zeroes the parameters' gradients, then accumulates the step's gradient into
// them. Collective: every rank calls it for every step, even with no examples.
// Metrics go into `reducer` (reduce() is left to the caller, which adds its
// own values first). Throws sdk::PluginError naming the plugin when its unit
// counts or loss sums do not match its loss terms, or when a term with units
// in a microbatch has a loss sum that does not require grad.
GradientResult accumulate_gradients(const StepParts& parts, const std::vector<const sdk::Example*>& rank_examples,
                                    const sdk::MicrobatchPlan& plan, metrics::MetricReducer& reducer);

// Global L2 norm of the gradients, then scales them to `max_norm` if larger
// (max_norm 0: no clipping). Returns the norm before clipping.
double clip_grad_norm(const std::vector<at::Tensor>& parameters, double max_norm);

}  // namespace ptrain::train
