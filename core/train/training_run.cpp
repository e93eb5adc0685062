#include "core/train/training_run.h"

#include "core/log/logger.h"
#include "core/log/step_phases.h"
#include "core/metrics/tensorboard_writer.h"
#include "core/model/gemm.h"
#include "core/model/model_transforms.h"
#include "core/shard/shared_output_check.h"
#include "core/train/compute_device.h"
#include "core/train/numeric_guard.h"
#include "core/train/output_model_files.h"
#include "core/train/rank_agreement.h"
#include "core/train/resume.h"
#include "core/train/run_directory.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <random>
#include <thread>

namespace ptrain::train {
namespace fs = std::filesystem;

namespace {

std::string new_run_id() {
  std::random_device device;
  char text[17];
  std::snprintf(text, sizeof text, "%08x%08x", device(), device());
  return text;
}

int thread_count(const config::RuntimeSection& runtime, int local_world_size) {
  if (runtime.threads > 0) return static_cast<int>(runtime.threads);
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return std::max(1, static_cast<int>(cores) / std::max(1, local_world_size));
}

// Every rank starts from rank 0's weights, whatever its own init or load did.
void broadcast_parameters(const std::vector<at::Tensor>& parameters, dist::Communicator& communicator) {
  if (communicator.world_size() == 1) return;
  std::vector<at::Tensor> flat_parts;
  for (const at::Tensor& parameter : parameters) flat_parts.push_back(parameter.detach().reshape({-1}));
  std::vector<at::Tensor> flat{at::cat(flat_parts)};
  communicator.broadcast(flat, 0);
  int64_t offset = 0;
  at::NoGradGuard no_grad;
  for (const at::Tensor& parameter : parameters) {
    parameter.copy_(flat[0].narrow(0, offset, parameter.numel()).view_as(parameter));
    offset += parameter.numel();
  }
}

RunDirectory::Use run_directory_use(const TrainOptions& options) {
  if (!options.resume.empty()) return RunDirectory::Use::kResume;
  return options.overwrite ? RunDirectory::Use::kOverwrite : RunDirectory::Use::kNew;
}

// The checkpoint a resume continues from, read and checked against the
// configured run before the run directory is touched; nullopt without one.
std::optional<checkpoint::LoadedCheckpoint> read_resume_checkpoint(const std::optional<fs::path>& dir,
                                                                   const std::string& plugin_name,
                                                                   const std::string& resolved_config_toml,
                                                                   const model::CausalLm& policy) {
  if (!dir) return std::nullopt;
  checkpoint::LoadedCheckpoint loaded = checkpoint::read_checkpoint(*dir);
  check_resume_fits(loaded, plugin_name, resolved_config_toml, policy);
  NumericGuard::check_record(loaded.trainer.numeric_guard, loaded.trainer.source);
  return loaded;
}

// A resumed run continues from the checkpoint's weights, plugin state and
// step (the data order follows from the step alone); returns the optimizer
// state, which is loaded once the weight update exists.
checkpoint::NamedTensors resume_from(checkpoint::LoadedCheckpoint& loaded, TrainingRun& run) {
  restore_policy(loaded, *run.parts.policy);
  run.module().load_state(run.context(), loaded.plugin_state);
  run.state = loaded.trainer;
  run.state.world_size = run.communicator.world_size();
  log::info("resume", "continuing from " + loaded.dir.string() + " after step " +
                          std::to_string(run.state.completed_steps) + " (saved at world size " +
                          std::to_string(loaded.trainer.world_size) + ")");
  return std::move(loaded.optimizer_state);
}

// Sharding "full" on several ranks: the layer operations' protocol, which
// every later collective drains first (layer_collectives.h); null otherwise.
std::unique_ptr<shard::LayerCollectives> layer_collectives_if_full(const config::RunConfig& config,
                                                                   dist::Communicator& communicator,
                                                                   dist::DrainingCommunicator& draining) {
  if (config.distributed.sharding != config::ShardingMode::kFull || communicator.world_size() == 1) return nullptr;
  auto collectives = std::make_unique<shard::LayerCollectives>(communicator);
  draining.set_before_collective([&protocol = *collectives] { protocol.drain(); });
  return collectives;
}

// A reference model the plugin gets under sharding "full" is sharded too;
// the model owns its shards.
plugin::HostContext::FrozenModelHook frozen_model_sharding(shard::LayerCollectives* collectives) {
  if (collectives == nullptr) return {};
  return [collectives](model::CausalLm& model, const std::string& role) {
    model::shard_layers(model,
                        std::make_unique<shard::ShardedLayers>(model, *collectives, shard::ShardedLayers::Use::kFrozen));
    log::info("train", "sharding full: a " + role + " model's " + std::to_string(model.num_layers()) +
                           " decoder layers are sharded too");
  };
}

// The policy's decoder layers become shards under sharding "full". Returns
// the parameters the rest of the run trains directly: those outside the
// layers (all of them otherwise).
std::vector<at::Tensor> shard_policy_layers(TrainingRun& run,
                                            const std::vector<std::pair<std::string, at::Tensor>>& named) {
  std::vector<at::Tensor> parameters;
  for (const auto& [name, parameter] : named) parameters.push_back(parameter);
  if (!run.layer_collectives) return parameters;
  run.sharded_layers = std::make_unique<shard::ShardedLayers>(*run.parts.policy, *run.layer_collectives);
  const bool bf16 = run.parts.policy->compute_dtype() == at::kBFloat16;
  log::info("train", "sharding full: the policy's " + std::to_string(run.parts.policy->num_layers()) +
                         " decoder layers are sharded over " + std::to_string(run.communicator.world_size()) +
                         " ranks; their gathers move " +
                         (bf16 ? "the matrices in bfloat16 (norm weights and biases in float32)" : "float32") +
                         (run.config.distributed.generation_gather == config::GenerationGather::kWhole
                              ? "; rollouts hold them whole (distributed.generation_gather = \"whole\")"
                              : ""));
  std::vector<at::Tensor> replicated;
  for (const at::Tensor& parameter : parameters) {
    if (!run.sharded_layers->holds(parameter)) replicated.push_back(parameter);
  }
  return replicated;
}

void log_start(const TrainingRun& run, const sdk::PluginInfo& plugin, int threads) {
  log::info("train",
            "plugin " + std::string(plugin.name) + " " + plugin.version + ", " +
                std::to_string(run.num_parameters) + " parameters, " +
                std::to_string(run.parts.examples.size()) + " examples, " +
                std::to_string(run.sampler.steps_per_epoch()) + " steps per epoch, " + std::to_string(threads) +
                " threads, world size " + std::to_string(run.communicator.world_size()) + ", " +
                describe_compute(run.parts.device, run.config.runtime.precision) + ", matmul " + model::gemm_backend());
}

}  // namespace

sdk::GlobalBatch TrainingRun::global_batch(int64_t step) const {
  const log::PhaseScope phase(log::StepPhase::kData);
  return training_global_batch(parts.examples, sampler.global_batch(step), communicator.rank(),
                               communicator.world_size());
}

checkpoint::CheckpointData TrainingRun::snapshot() const {
  checkpoint::CheckpointData data;
  data.model = parts.policy.get();
  data.optimizer_state = weight_update->state_tensors();
  data.optimizer_state_sharded = weight_update->state_is_sharded();
  // The plugin's state only where it is written (sdk::TrainModule::save_state).
  if (communicator.rank() == 0) data.plugin_state = parts.module->save_state();
  data.trainer = state;
  data.config_toml = resolved_config_toml;
  data.model_files = &model_files;
  return data;
}

void log_state_memory(const TrainingRun& run) {
  // Under sharding "full" a rank keeps a weight and a gradient chunk of every layer.
  const int64_t layer_chunks = run.sharded_layers ? run.sharded_layers->chunk_bytes() : 0;
  int64_t parameters = layer_chunks;
  int64_t gradients = run.grad_sync->buffer_bytes() + layer_chunks;
  int64_t optimizer = 0;
  for (const at::Tensor& parameter : run.parameters) {
    parameters += static_cast<int64_t>(parameter.nbytes());
    if (parameter.grad().defined()) gradients += static_cast<int64_t>(parameter.grad().nbytes());
  }
  for (const auto& [name, tensor] : run.weight_update->state_tensors()) {
    optimizer += static_cast<int64_t>(tensor.nbytes());
  }
  const auto mib = [](int64_t bytes) { return std::to_string(static_cast<double>(bytes) / (1 << 20)) + " MiB"; };
  log::info("memory", "rank " + std::to_string(run.communicator.rank()) + " holds parameters " + mib(parameters) +
                          ", gradients " + mib(gradients) + " (with collective buffers), optimizer state " +
                          mib(optimizer));
}

std::unique_ptr<TrainingRun> build_training_run(const config::RunConfig& config, const plugin::LoadedPlugin& plugin,
                                                dist::Communicator& communicator, const TrainOptions& options) {
  const fs::path output_dir = config.output_dir;
  // First: a directory another run holds is refused before anything loads.
  auto run_dir = std::make_unique<RunDirectory>(output_dir, run_directory_use(options), communicator);
  const std::optional<fs::path> resume_checkpoint =
      options.resume.empty() ? std::nullopt : checkpoint::find_resume_checkpoint(options.resume, output_dir);
  check_ranks_agree(communicator, run_aspects(config, plugin, options.resolved_config_toml, resume_checkpoint,
                                              communicator.world_size()));
  if (config.logging.tensorboard) metrics::require_tensorboard_available();
  const int threads = thread_count(config.runtime, communicator.local_world_size());
  at::set_num_threads(threads);

  auto draining = std::make_unique<dist::DrainingCommunicator>(communicator);
  std::unique_ptr<shard::LayerCollectives> collectives = layer_collectives_if_full(config, communicator, *draining);
  RunParts parts =
      load_run_parts(config, module_factory(plugin), options.device, *draining, frozen_model_sharding(collectives.get()));
  // Read now, so that an unreadable input file fails before the run directory exists.
  checkpoint::ModelDirFiles model_files = output_model_files(config, *parts.tokenizer);
  std::optional<checkpoint::LoadedCheckpoint> resumed =
      read_resume_checkpoint(resume_checkpoint, plugin.info().name, options.resolved_config_toml, *parts.policy);
  run_dir->create(options.resolved_config_toml);
  if (config.distributed.sharding != config::ShardingMode::kNone && communicator.world_size() > 1) {
    shard::check_output_dir_shared(communicator, output_dir);
  }

  const data::GlobalBatchSampler sampler(static_cast<int64_t>(parts.examples.size()), config.batch.global_size,
                                         config.seed);
  auto run = std::make_unique<TrainingRun>(config, std::move(draining), std::move(collectives), plugin.info().name,
                                           options.resolved_config_toml, std::move(parts), sampler,
                                           microbatch_plan(config));
  run->directory = std::move(run_dir);
  run->model_files = std::move(model_files);
  run->parts.prepare_dataset([&run = *run](int64_t step) { return run.rank_examples(step); });
  run->state.world_size = communicator.world_size();
  run->state.plugin = plugin.info().name;
  run->state.run_id = new_run_id();
  checkpoint::NamedTensors optimizer_state;
  if (resumed) {
    optimizer_state = resume_from(*resumed, *run);
  } else if (!options.resume.empty()) {
    log::info("resume", "no checkpoint under " + (output_dir / "checkpoints").string() + "; starting from step 0");
  }
  run->first_step = run->state.completed_steps;
  const auto named_parameters = run->parts.policy->named_parameters();
  run->num_parameters = run->parts.policy->num_parameters();
  std::vector<at::Tensor> all_parameters;
  for (const auto& [name, parameter] : named_parameters) all_parameters.push_back(parameter);
  broadcast_parameters(all_parameters, communicator);
  run->parameters = shard_policy_layers(*run, named_parameters);
  // Reduce-scattered gradients: all of them under "optimizer", the replicated
  // tensors' under "full" (the layers' are reduce-scattered layer by layer).
  const bool sharded = config.distributed.sharding == config::ShardingMode::kOptimizer || run->sharded_layers;
  run->grad_sync = std::make_unique<dist::GradientSynchronizer>(run->parameters, run->communicator,
                                                                config.distributed.bucket_mb << 20, sharded);
  run->weight_update = make_weight_update(config, named_parameters, *run->grad_sync, run->communicator,
                                          run->sharded_layers.get());
  if (resumed) run->weight_update->load_state_tensors(optimizer_state);
  log_start(*run, plugin.info(), threads);
  return run;
}

}  // namespace ptrain::train
