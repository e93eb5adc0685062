// One process computing steps of a run built as `ptrain train` builds it
// (train::load_run_parts: the same tokenizer, policy, plugin set-up and
// dataset checks), but with the split of the step chosen by the caller: the
// harness's reference and its split variants.
#pragma once

#include "core/config/run_config.h"
#include "core/dist/communicator.h"
#include "core/dist/gradient_sync.h"
#include "core/model/causal_lm.h"
#include "core/plugin/host_context.h"
#include "core/plugin/plugin_loader.h"
#include "core/train/run_setup.h"
#include "core/train/update_step.h"

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ptrain::testing {

// The result of one step through the core's update step.
struct StepOutcome {
  train::GradientResult result;
  std::vector<at::Tensor> gradients;      // named_parameters() order
  std::map<std::string, double> metrics;  // reduced: core/loss, core/tokens, ... and the plugin's
};

// Tensor-to-scalar reads counted inside one step's microbatch loop.
struct LoopReads {
  int64_t microbatches = 0;
  int64_t reads = 0;
};

// One update step as the trainer's sampler deals it (0-based step).
struct StepBatch {
  int64_t step = 0;
  int64_t epoch = 0;
  std::vector<int64_t> indices;  // the global batch, in batch order
};

// What the plugin reported per microbatch when asked directly.
struct MicrobatchUnits {
  std::vector<int64_t> before_forward;  // count_units: one count per loss term
  std::vector<int64_t> after_forward;
  std::vector<double> loss_sums;  // one per loss term
  // Loss sums not on the model's device, or in a dtype narrower than float32;
  // empty when every one is where and what it should be.
  std::string placement_problems;
};

class InProcessRun {
 public:
  InProcessRun(const plugin::LoadedPlugin& plugin, config::RunConfig config);
  ~InProcessRun();

  // The global batch of `step` (0-based), as the trainer's sampler deals it.
  StepBatch step_batch(int64_t step) const;
  // Updates the policy as `ptrain train` with SGD at lr 1 (no clipping, no
  // weight decay) would in each of `steps`, each global batch one
  // microbatch, ending each with the plugin's end_step(). Each runs at its
  // own step number; set_step() then moves the run on.
  void take_steps(const std::vector<StepBatch>& steps);
  // Moves the plugin's context to a step (the one the checks compute).
  void set_step(int64_t step, int64_t epoch) { parts_.context->set_step(step, epoch); }
  const std::vector<sdk::Example>& examples() const { return parts_.examples; }
  const config::RunConfig& config() const { return config_; }
  std::vector<sdk::MetricSpec> metric_specs() const { return parts_.module->metric_specs(); }
  // Copies of the policy's weights (step() accumulates gradients and never updates).
  std::vector<at::Tensor> parameter_values() const;

  // accumulate_gradients() over these examples, split by `plan`; they are
  // the whole global batch (one process), as the plugin's ctx.global_batch() says.
  StepOutcome step(const std::vector<int64_t>& example_indices, const sdk::MicrobatchPlan& plan);

  // step(), counting the tensor-to-scalar reads of its microbatch loop (scalar_reads.h).
  LoopReads loop_scalar_reads(const std::vector<int64_t>& example_indices, const sdk::MicrobatchPlan& plan);

  // prepare(), then per microbatch: counts, the forward (no backward), counts again.
  std::vector<MicrobatchUnits> audit_units(const std::vector<int64_t>& example_indices,
                                           const sdk::MicrobatchPlan& plan);

 private:
  std::vector<const sdk::Example*> pointers(const std::vector<int64_t>& example_indices) const;
  // Makes the examples the context's global batch; returns them.
  std::vector<const sdk::Example*> start_batch(const std::vector<int64_t>& example_indices);
  train::StepParts step_parts(sdk::TrainModule& module);

  config::RunConfig config_;
  std::string plugin_name_;
  std::unique_ptr<dist::Communicator> communicator_;  // before the parts, whose context uses it
  train::RunParts parts_;
  std::vector<at::Tensor> parameters_;
  std::unique_ptr<dist::GradientSynchronizer> grad_sync_;
};

}  // namespace ptrain::testing
