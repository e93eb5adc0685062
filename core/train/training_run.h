// A training run's parts, built before its first step and handed to the loop
// as typed objects (docs/style.md#set-up-is-not-the-loop): the tokenizer, policy and plugin module,
// the dataset and its sampler, the optimizer and gradient synchronisation,
// and the step counters a resumed run continues from. Building loads and
// checks everything before the run directory is created or replaced, so a
// run that fails to load leaves an existing directory as it was
// (run_directory.h).
#pragma once

#include "core/checkpoint/checkpoint.h"
#include "core/config/run_config.h"
#include "core/data/global_batch_sampler.h"
#include "core/dist/communicator.h"
#include "core/dist/draining_communicator.h"
#include "core/dist/gradient_sync.h"
#include "core/plugin/host_context.h"
#include "core/plugin/plugin_loader.h"
#include "core/shard/layer_collectives.h"
#include "core/shard/sharded_layers.h"
#include "core/train/evaluator.h"
#include "core/train/global_batches.h"
#include "core/train/run_directory.h"
#include "core/train/run_setup.h"
#include "core/train/train_options.h"
#include "core/train/update_step.h"
#include "core/train/weight_update.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ptrain::train {

struct TrainingRun {
  TrainingRun(const config::RunConfig& run_config, std::unique_ptr<dist::DrainingCommunicator> run_communicator,
              std::unique_ptr<shard::LayerCollectives> run_layer_collectives, std::string plugin,
              std::string config_toml, RunParts run_parts, data::GlobalBatchSampler batch_sampler,
              sdk::MicrobatchPlan microbatch_plan)
      : config(run_config),
        draining_communicator(std::move(run_communicator)),
        communicator(*draining_communicator),
        layer_collectives(std::move(run_layer_collectives)),
        plugin_name(std::move(plugin)),
        resolved_config_toml(std::move(config_toml)),
        parts(std::move(run_parts)),
        sampler(batch_sampler),
        plan(microbatch_plan) {}

  const config::RunConfig& config;
  // Held (and locked) for the whole run; declared first, so released last.
  std::unique_ptr<RunDirectory> directory;
  // Every collective of the run goes through it: under sharding "full" it
  // first lets peers finish their layer gathers (sharded_layers.h).
  std::unique_ptr<dist::DrainingCommunicator> draining_communicator;
  dist::Communicator& communicator;
  // Sharding "full" on several ranks, else null: the layer operations of the
  // policy and of the references (which the models in `parts` own), so it
  // outlives them.
  std::unique_ptr<shard::LayerCollectives> layer_collectives;
  std::string plugin_name;
  std::string resolved_config_toml;
  RunParts parts;  // tokenizer, policy, module, context, examples
  data::GlobalBatchSampler sampler;
  sdk::MicrobatchPlan plan;
  int64_t num_parameters = 0;                             // the policy's, sharded or not
  std::unique_ptr<shard::ShardedLayers> sharded_layers;   // the policy's under sharding "full" on several ranks
  // The policy's parameters in named_parameters() order, under sharding
  // "full" only those outside the decoder layers (the rest are sharded_layers').
  std::vector<at::Tensor> parameters;
  std::unique_ptr<dist::GradientSynchronizer> grad_sync;  // sharded under distributed.sharding = "optimizer"
  std::unique_ptr<WeightUpdate> weight_update;            // clipping and the optimizer, over grad_sync's result
  checkpoint::TrainerState state;                         // steps completed and skipped so far, run id
  int64_t first_step = 0;                                 // steps completed when this invocation started
  checkpoint::ModelDirFiles model_files;  // what final/ and checkpoints hold besides weights (output_model_files.h)

  sdk::TrainModule& module() { return *parts.module; }
  plugin::HostContext& context() { return *parts.context; }
  // What accumulate_gradients() works with in every step.
  StepParts step_parts() {
    return {module(), plugin_name, context(), parameters, communicator, *grad_sync, sharded_layers.get()};
  }
  // What the evaluator works with: the held-out set and the same plan as a step.
  EvalParts eval_parts() {
    return {module(),      plugin_name, context(), communicator, parts.eval_examples, plan, config.batch.global_size,
            parts.generation_eval.get()};
  }
  // The global batch of `step` (0-based), with this rank's slice of it.
  sdk::GlobalBatch global_batch(int64_t step) const;
  // This rank's examples of `step`: its slice of the global batch.
  std::vector<const sdk::Example*> rank_examples(int64_t step) const { return rank_share(global_batch(step)); }
  // What a checkpoint of the current state holds, on every rank: rank 0's
  // is written; under sharding every rank writes its optimizer pieces.
  checkpoint::CheckpointData snapshot() const;
};

// Logs (rank 0) the bytes this rank holds in parameters, gradients (with
// the collectives' buffers) and optimizer state: what distributed.sharding
// divides (bench/figures.py reads this line).
void log_state_memory(const TrainingRun& run);

// Collective. Opens (locks) the run directory, loads and checks everything
// (a resumed checkpoint included), then creates the run directory with
// config.toml and the log file (setting aside the run it replaces, with
// options.overwrite), prepares the dataset and restores the checkpoint.
std::unique_ptr<TrainingRun> build_training_run(const config::RunConfig& config, const plugin::LoadedPlugin& plugin,
                                                dist::Communicator& communicator, const TrainOptions& options);

}  // namespace ptrain::train
