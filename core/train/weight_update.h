// How a step's gradient becomes new weights: clipping to the global gradient
// norm, then the optimizer. Sharding "none" runs both on every rank over the
// whole model; "optimizer" (ZeRO-1/2, docs/distributed.md#sharding-distributedsharding) runs them on each rank's
// shard of the reduce-scattered gradient and all-gathers the updated shards
// (sharded_update.h). Both give the same weights, and both load the
// optimizer state per parameter, so a checkpoint resumes under any sharding
// mode and world size.
#pragma once

#include "core/checkpoint/checkpoint.h"
#include "core/config/run_config.h"
#include "core/dist/communicator.h"
#include "core/dist/gradient_sync.h"

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ptrain::shard {
class ShardedLayers;
}  // namespace ptrain::shard

namespace ptrain::train {

class WeightUpdate {
 public:
  virtual ~WeightUpdate() = default;
  // Collective. The L2 norm of the whole step's gradient (after
  // GradientSynchronizer::finish), scaled down to `max_norm` when larger
  // (0: no clipping). Returns the norm before clipping.
  virtual double clip_grad_norm(double max_norm) = 0;
  // Collective. One optimizer update; afterwards every rank holds the same weights.
  virtual void step(double lr) = 0;
  // What this rank saves of the optimizer state, named as
  // ParameterOptimizer::state_tensors() names it: whole tensors, or under
  // sharding this rank's pieces of them (checkpoint/state_pieces.h), which
  // every rank writes to its own file.
  virtual checkpoint::NamedTensors state_tensors() const = 0;
  virtual bool state_is_sharded() const = 0;
  // Whole tensors (or flattened ones joined from shards), saved under any
  // sharding mode and world size.
  virtual void load_state_tensors(const checkpoint::NamedTensors& tensors) = 0;
};

// As config.distributed.sharding says (with one rank there is nothing to
// shard: "optimizer" and "full" run as "none"). `grad_sync` must have been
// built sharded for "optimizer"; for "full", `sharded_layers` holds the
// decoder layers and `grad_sync` (sharded too) the other parameters. Throws
// sdk::ConfigError naming distributed.sharding when the world size is larger
// than a gradient bucket or a layer has elements (a rank would own only
// padding of it).
std::unique_ptr<WeightUpdate> make_weight_update(
    const config::RunConfig& config, const std::vector<std::pair<std::string, at::Tensor>>& named_parameters,
    dist::GradientSynchronizer& grad_sync, dist::Communicator& communicator,
    shard::ShardedLayers* sharded_layers = nullptr);

}  // namespace ptrain::train
