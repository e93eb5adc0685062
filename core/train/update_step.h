// The gradient of one global batch (DESIGN.md §2).
//
//   n[r,k] = count_units(microbatch k on rank r)      before any forward
//   N      = Σ_r Σ_k n[r,k]                           one all-reduce
//   for each k: backward(S[r,k] / divisor(N))         divisor = N, or 1 for `sum`
//   all-reduce gradients with SUM once, during and after the last
//   microbatch's backward (dist::GradientSynchronizer)
// so the step's gradient, ∇ ΣS / divisor, is the same for every split of the
// global batch over ranks, microbatch sizes and accumulation counts.
#pragma once

#include "core/dist/communicator.h"
#include "core/dist/gradient_sync.h"
#include "core/metrics/metric_reducer.h"
#include "ptrain/sdk/train_module.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace ptrain::train {

struct GradientResult {
  bool has_units = false;      // false: nothing to learn from anywhere; gradients untouched
  int64_t global_units = 0;    // N
  std::vector<int64_t> global_extra_units;  // N_j of the plugin's extra loss terms
  int64_t num_microbatches = 0;  // on this rank
  double local_loss = 0.0;       // this rank's share of L (what it adds to core/loss)
};

// The metrics a step reduces: those accumulate_gradients() adds — core/loss
// (this rank's share of L, so the reduced sum is L exactly), core/tokens,
// core/padded_tokens — then the plugin's. Throws sdk::PluginError when a
// plugin metric takes a name the core writes (loss, grad_norm, ...).
std::vector<sdk::MetricSpec> step_metric_specs(const sdk::TrainModule& module);

// Zeroes the parameters' gradients, then accumulates the step's gradient into
// them. Collective: every rank calls it for every step, even with no examples.
// Plugin metrics go into `reducer` (reduce() is left to the caller, which
// adds its own values first).
GradientResult accumulate_gradients(sdk::TrainModule& module, sdk::Context& context,
                                    const std::vector<const sdk::Example*>& rank_examples,
                                    const sdk::MicrobatchPlan& plan, const std::vector<at::Tensor>& parameters,
                                    dist::Communicator& communicator, dist::GradientSynchronizer& grad_sync,
                                    metrics::MetricReducer& reducer);

// Global L2 norm of the gradients, then scales them to `max_norm` if larger
// (max_norm 0: no clipping). Returns the norm before clipping.
double clip_grad_norm(const std::vector<at::Tensor>& parameters, double max_norm);

}  // namespace ptrain::train
