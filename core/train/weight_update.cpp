#include "core/train/weight_update.h"

#include "core/log/logger.h"
#include "core/log/step_phases.h"
#include "core/train/full_sharded_optimizer.h"
#include "core/train/optimizer.h"
#include "core/train/sharded_update.h"
#include "core/train/update_step.h"
#include "ptrain/sdk/errors.h"

namespace ptrain::train {
namespace {

// Sharding "none": the whole model's optimizer on every rank.
class ReplicatedUpdate final : public WeightUpdate {
 public:
  ReplicatedUpdate(const config::OptimSection& optim,
                   const std::vector<std::pair<std::string, at::Tensor>>& named_parameters)
      : optimizer_(optim, named_parameters) {
    for (const auto& [name, parameter] : named_parameters) parameters_.push_back(parameter);
  }

  double clip_grad_norm(double max_norm) override { return train::clip_grad_norm(parameters_, max_norm); }
  void step(double lr) override { optimizer_.step(lr); }
  checkpoint::NamedTensors state_tensors() const override { return optimizer_.state_tensors(); }
  bool state_is_sharded() const override { return false; }
  void load_state_tensors(const checkpoint::NamedTensors& tensors) override { optimizer_.load_state_tensors(tensors); }

 private:
  ParameterOptimizer optimizer_;
  std::vector<at::Tensor> parameters_;
};

// Clipping and the optimizer step as the step-phase timers' "optimizer"
// phase (core/log/step_phases.h), around whichever update the sharding mode picked.
class OptimizerPhase final : public WeightUpdate {
 public:
  explicit OptimizerPhase(std::unique_ptr<WeightUpdate> update) : update_(std::move(update)) {}

  double clip_grad_norm(double max_norm) override {
    const log::PhaseScope phase(log::StepPhase::kOptimizer);
    return update_->clip_grad_norm(max_norm);
  }
  void step(double lr) override {
    const log::PhaseScope phase(log::StepPhase::kOptimizer);
    update_->step(lr);
  }
  checkpoint::NamedTensors state_tensors() const override { return update_->state_tensors(); }
  bool state_is_sharded() const override { return update_->state_is_sharded(); }
  void load_state_tensors(const checkpoint::NamedTensors& tensors) override { update_->load_state_tensors(tensors); }

 private:
  std::unique_ptr<WeightUpdate> update_;
};

// Every rank must own part of every bucket: a rank holding only padding of
// one would have nothing to update there, which is a world size the model's
// trainable parameters cannot be split over.
void check_shardable(const config::RunConfig& config, const dist::GradientSynchronizer& grad_sync, int world_size) {
  const std::vector<dist::BucketLayout>& layout = grad_sync.layout();
  for (size_t b = 0; b < layout.size(); ++b) {
    // The last rank's chunk starts at ·c; it must start before the padding.
    if ((world_size - 1) * layout[b].chunk < layout[b].numel) continue;
    const char* mode = config.distributed.sharding == config::ShardingMode::kFull ? "full" : "optimizer";
    throw sdk::ConfigError(config.source.string() + ": distributed.sharding = \"" + mode + "\" splits every gradient " +
                           "bucket into equal chunks, one for each of the " + std::to_string(world_size) +
                           " ranks, but bucket " + std::to_string(b) + " holds only " +
                           std::to_string(layout[b].numel) + " trainable elements, too few for every rank to own " +
                           "some; use fewer ranks, a larger distributed.bucket_mb, or sharding = \"none\"");
  }
}

// The same rule for sharding "full"'s per-layer chunks.
void check_layers_shardable(const config::RunConfig& config, shard::ShardedLayers& layers, int world_size) {
  for (size_t i = 0; i < layers.num_layers(); ++i) {
    const dist::LayerShards& layer = layers.layer(i);
    if ((world_size - 1) * layer.chunk() < layer.numel()) continue;
    throw sdk::ConfigError(config.source.string() + ": distributed.sharding = \"full\" splits every decoder " +
                           "layer into equal chunks, one for each of the " + std::to_string(world_size) +
                           " ranks, but layer " + std::to_string(i) + " holds only " +
                           std::to_string(layer.numel()) + " elements, too few for every rank to own some; use " +
                           "fewer ranks or another sharding mode");
  }
}

std::unique_ptr<WeightUpdate> make_update_for_sharding(
    const config::RunConfig& config, const std::vector<std::pair<std::string, at::Tensor>>& named_parameters,
    dist::GradientSynchronizer& grad_sync, dist::Communicator& communicator, shard::ShardedLayers* sharded_layers) {
  const bool wants_sharding = config.distributed.sharding != config::ShardingMode::kNone;
  if (wants_sharding && communicator.world_size() == 1) {
    log::info("train", "distributed.sharding: one rank has nothing to share; running unsharded");
  }
  if (sharded_layers != nullptr) {
    check_layers_shardable(config, *sharded_layers, communicator.world_size());
    check_shardable(config, grad_sync, communicator.world_size());
    return std::make_unique<FullShardedOptimizer>(config.optim, named_parameters, *sharded_layers, communicator,
                                                  &grad_sync);
  }
  if (!grad_sync.sharded()) return std::make_unique<ReplicatedUpdate>(config.optim, named_parameters);
  check_shardable(config, grad_sync, communicator.world_size());
  return std::make_unique<ShardedUpdate>(config.optim, named_parameters, grad_sync, communicator);
}

}  // namespace

std::unique_ptr<WeightUpdate> make_weight_update(
    const config::RunConfig& config, const std::vector<std::pair<std::string, at::Tensor>>& named_parameters,
    dist::GradientSynchronizer& grad_sync, dist::Communicator& communicator, shard::ShardedLayers* sharded_layers) {
  return std::make_unique<OptimizerPhase>(
      make_update_for_sharding(config, named_parameters, grad_sync, communicator, sharded_layers));
}

}  // namespace ptrain::train
