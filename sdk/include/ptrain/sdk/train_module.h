// The one interface an algorithm implements: turn a microbatch into a loss sum.
//
// Per microbatch k on rank r the core asks for n[r,k] = count_units() before
// any forward pass, all-reduces N = Σ n, then backpropagates
// microbatch_loss().loss_sum / loss_divisor(N) for each microbatch, so a
// step's gradient does not depend on how its global batch was split
// (DESIGN.md §2). loss_sum must be a SUM over the microbatch's units, never a
// mean.
//
// A loss that adds terms normalised by other units (DPO's NLL term is a mean
// over the completion tokens of the whole global batch while its main term is
// a mean over pairs) declares num_extra_loss_terms() = E and reports, per
// microbatch, E more unit counts and E more sums. The step loss is then
//   L = ΣS / divisor(N) + Σ_j ΣS_j / extra_divisor(j, N_j)
// where a term with N_j = 0 adds nothing. All counts travel in one all-reduce.
#pragma once

#include "ptrain/sdk/batch.h"
#include "ptrain/sdk/context.h"
#include "ptrain/sdk/metrics.h"

#include <nlohmann/json.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ptrain::sdk {

// What a plugin keeps across a resume beyond the policy and optimizer (e.g. a
// reference model TR-DPO keeps updating, or where its cache lives).
struct PluginState {
  nlohmann::json meta = nlohmann::json::object();
  std::vector<std::pair<std::string, at::Tensor>> tensors;
};

struct LossOut {
  at::Tensor loss_sum;                      // differentiable scalar: Σ of the loss over this microbatch's units
  std::vector<at::Tensor> extra_loss_sums;  // num_extra_loss_terms() scalars, each a Σ over its own units
  MetricList metrics;
};

class TrainModule {
 public:
  virtual ~TrainModule() = default;

  // Reads ctx.module_config() into the plugin's typed config; builds
  // reference models or caches.
  virtual void setup(Context& ctx) = 0;

  // Every metric microbatch_loss() may emit, with its reduction.
  virtual std::vector<MetricSpec> metric_specs() const = 0;

  // Throws DataError "file:line: field ..." when the example lacks what this
  // algorithm needs. Called on every example before training and by `ptrain validate`.
  virtual void check_example(const Example& example) const = 0;

  // Called once on every rank after the whole dataset is read and checked,
  // before the first step (e.g. to precompute reference log-probs, each rank
  // for its shard, assembled with ctx.all_reduce_sum). May use collectives.
  virtual void prepare_dataset(Context& ctx, const std::vector<Example>& examples) {}

  // Collates this rank's examples of the step into microbatches (GRPO also
  // generates and scores here). Called on every rank every step, with an
  // empty list on a rank that has no example this step.
  virtual std::vector<std::unique_ptr<Microbatch>> prepare(Context& ctx, const std::vector<const Example*>& examples,
                                                           const MicrobatchPlan& plan) = 0;

  // n[r,k]: loss units of a microbatch, known before its forward pass.
  virtual int64_t count_units(const Microbatch& microbatch) const = 0;

  // The step loss divisor given the global unit count N (e.g. 1 for `sum`).
  virtual double loss_divisor(int64_t global_units) const { return static_cast<double>(global_units); }

  // Further loss terms with units of their own (see the top of this file).
  virtual size_t num_extra_loss_terms() const { return 0; }
  virtual std::vector<int64_t> count_extra_units(const Microbatch& microbatch) const { return {}; }
  virtual double extra_loss_divisor(size_t term, int64_t global_units) const {
    return static_cast<double>(global_units);
  }

  // S[r,k] and metrics.
  virtual LossOut microbatch_loss(Context& ctx, const Microbatch& microbatch) = 0;

  // Called on every rank once a step's update is done (also when the step
  // was skipped), before a checkpoint of the step may be saved: state that
  // ranks accumulate during a step is combined here (may use collectives),
  // so that save_state() on rank 0 sees all of it.
  virtual void end_step(Context& ctx) {}

  // Saved in every checkpoint (rank 0's), and handed back on every rank after
  // setup() and prepare_dataset() when a run resumes.
  virtual PluginState save_state() const { return {}; }
  virtual void load_state(Context& ctx, const PluginState& state) {}
};

}  // namespace ptrain::sdk
