// The update half of sharding "full" (ZeRO-3): clipping and the optimizer
// over what a rank holds after the backward pass — every decoder layer's
// chunk (shard::ShardedLayers: master weights and summed gradients) and the
// replicated tensors (embeddings, final norm, lm_head). Those are updated
// either whole on every rank, their .grad summed over ranks by a
// GradientSynchronizer, or, given a sharded one, as sharding "optimizer"
// does (sharded_update.h: each rank steps its chunks and the chunks are
// all-gathered). The optimizer runs elementwise, so each element sees the
// arithmetic of sharding "none".
#pragma once

#include "core/checkpoint/checkpoint.h"
#include "core/config/run_config.h"
#include "core/dist/communicator.h"
#include "core/shard/sharded_layers.h"
#include "core/train/optimizer.h"
#include "core/train/sharded_update.h"
#include "core/train/weight_update.h"

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ptrain::train {

class FullShardedOptimizer final : public WeightUpdate {
 public:
  // `named_parameters`: the model's, layers included (released); the
  // replicated ones are those of no layer. `replicated_sync`: null, or a
  // sharded GradientSynchronizer over exactly the replicated ones, in
  // named_parameters() order. `layers`, `communicator` and `replicated_sync`
  // outlive this object.
  FullShardedOptimizer(const config::OptimSection& optim,
                       const std::vector<std::pair<std::string, at::Tensor>>& named_parameters,
                       shard::ShardedLayers& layers, dist::Communicator& communicator,
                       dist::GradientSynchronizer* replicated_sync = nullptr);
  ~FullShardedOptimizer() override;

  // Collective. The whole step's gradient norm (replicated tensors counted
  // once, every layer chunk once), scaled down to `max_norm` when larger, as
  // train::clip_grad_norm does under "none". Returns the norm before clipping.
  double clip_grad_norm(double max_norm) override;
  // Steps every rank's own elements, then zeroes the layers' gradient
  // shards (the next step accumulates afresh); the layers' new weights
  // reach the model at their next gather.
  void step(double lr) override;

  // What this rank saves of the optimizer state, in the pieces format of
  // sharding "optimizer" (checkpoint/state_pieces.h): its pieces of every
  // layer tensor's state as "<tensor>.<kind>@<offset>", and on rank 0 the
  // replicated tensors' whole state; joined, it is ParameterOptimizer's
  // naming under "none". Empty before the first step.
  checkpoint::NamedTensors state_tensors() const override;
  bool state_is_sharded() const override { return true; }
  // Whole tensors (or flattened ones joined from pieces) saved under any
  // sharding mode and world size.
  void load_state_tensors(const checkpoint::NamedTensors& tensors) override;

 private:
  // A part of one layer tensor in this rank's chunk.
  struct Piece {
    std::string key;        // the optimizer's name for it
    std::string parameter;  // the model's name of the whole tensor
    int64_t parameter_offset = 0;
    bool first_of_parameter = true;  // saves the tensor's ".step"
  };
  // This rank's pieces of layer `layer`'s tensors, for the optimizer.
  void add_layer_pieces(const config::OptimSection& optim, size_t layer, int rank,
                        const std::map<const void*, std::string>& names, std::vector<OptimizedTensor>& tensors);
  std::vector<std::string> state_kinds() const;

  shard::ShardedLayers& layers_;
  dist::Communicator& communicator_;
  std::vector<at::Tensor> replicated_;
  std::vector<std::string> replicated_names_;
  std::vector<Piece> piece_info_;  // alongside pieces_
  bool is_adamw_;
  bool has_momentum_;
  std::vector<at::Tensor> pieces_;  // views of the weight shards; .grad views of the gradient shards
  std::unique_ptr<ParameterOptimizer> optimizer_;
  std::unique_ptr<ShardedUpdate> replicated_update_;  // with a sharded replicated_sync; replicated_ is then empty
};

}  // namespace ptrain::train
