// The one interface an algorithm implements: turn a microbatch into loss sums.
//
// A loss has one or more terms (docs/plugins.md, "Loss terms and aggregation
// modes"), each with units of its own:
// SFT's NLL over tokens; DPO's pair losses over pairs plus an NLL term over
// chosen tokens. The plugin declares its terms once (loss_terms()); per
// microbatch k on rank r the core asks for n_j[r,k] = count_units()[j]
// before any forward pass, all-reduces N_j = Σ n_j in one collective, then
// backpropagates Σ_j microbatch_loss().loss_sums[j] / divisor_j(N_j) for
// each microbatch, so that the step loss is
//   L = Σ_j Σ_{r,k} S_j[r,k] / divisor_j(N_j)      (a term with N_j = 0 adds nothing)
// and a step's gradient does not depend on how its global batch was split.
// A loss sum is a SUM over the microbatch's units of its term, never a mean.
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

// How a term's global unit count N_j becomes its divisor.
enum class TermDivisor {
  kGlobalUnits,  // N_j: the term is a mean over the global batch's units
  kOne,          // 1: the term is a sum; its units only tell an empty step (aggregation `sum`)
};

struct LossTerm {
  std::string name;  // the core logs the term's share of L as loss/<name>
  TermDivisor divisor = TermDivisor::kGlobalUnits;
};

struct LossOut {
  // One differentiable scalar per loss term, in loss_terms() order: the
  // term's Σ over this microbatch's units. A term with units in the
  // microbatch must have a sum that requires grad.
  std::vector<at::Tensor> loss_sums;
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
  // empty list on a rank that has no example this step, so it may use
  // collectives (e.g. a statistic over ctx.global_batch(), the whole global
  // batch of the step: docs/plugins.md, "Step-wide statistics"). It sees the
  // policy as the previous step's update left it (step 0: the initial
  // weights); forwards it runs without gradients count in the step's
  // throughput through ctx.add_forward_tokens().
  virtual std::vector<std::unique_ptr<Microbatch>> prepare(Context& ctx, const std::vector<const Example*>& examples,
                                                           const MicrobatchPlan& plan) = 0;

  // Collates held-out examples for an evaluation (the core's [eval]): their
  // microbatches go through count_units() and microbatch_loss() under
  // at::NoGradGuard and never into an update, and the core reduces the loss
  // sums and metrics over the whole held-out set as eval/<metric>. The core
  // evaluates the set in chunks of batch.global_size examples (the last one
  // shorter), one call per chunk on every rank (an empty list on a rank
  // without examples of it), so it may use collectives; ctx.global_batch()
  // is the chunk, with stable ids (positions in the held-out set). Called
  // between update steps with the policy as the last update left it. The
  // examples have index -1: prepare_dataset() never saw them. The default
  // collates as prepare() does; a plugin whose prepare() samples or keeps
  // state across steps (GRPO's rollouts) overrides it.
  virtual std::vector<std::unique_ptr<Microbatch>> prepare_eval(Context& ctx,
                                                                const std::vector<const Example*>& examples,
                                                                const MicrobatchPlan& plan) {
    return prepare(ctx, examples, plan);
  }

  // The loss terms, in the order count_units() and LossOut::loss_sums give
  // them. Read once, after setup().
  virtual std::vector<LossTerm> loss_terms() const = 0;

  // n_j[r,k] of each term: the microbatch's loss units, known before its
  // forward pass.
  virtual std::vector<int64_t> count_units(const Microbatch& microbatch) const = 0;

  // S_j[r,k] of each term, and metrics.
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

  // A run of this module resumes exactly only from a checkpoint whose
  // completed step count is a multiple of this: state that spans several
  // steps and that save_state() does not hold (GRPO's rollouts, which serve
  // num_iterations updates) exists only within such a cycle. The core saves
  // cadence and stop checkpoints at the next multiple. Read once, after setup().
  virtual int64_t checkpoint_multiple() const { return 1; }
};

}  // namespace ptrain::sdk
