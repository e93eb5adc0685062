// Sharding "full" (ZeRO-3): every decoder layer of a model sharded over the
// ranks with dist::LayerShards, as the model's LayerParameterSource
// (causal_lm.h). A building block: config validation still refuses "full"
// until the training loop uses it (docs/distributed.md).
#pragma once

#include "core/dist/communicator.h"
#include "core/dist/layer_shards.h"
#include "core/model/causal_lm.h"

#include <vector>

namespace ptrain::train {

class ShardedLayers final : public model::CausalLm::LayerParameterSource {
 public:
  // Collective-free: keeps this rank's chunk of every layer (the same
  // values on every rank) and releases the layers' full tensors; attaches
  // itself to `model`, which it must not outlive while attached (detach()).
  // Throws sdk::Error for a model with LoRA adapters.
  ShardedLayers(model::CausalLm& model, dist::Communicator& communicator);

  void gather(size_t layer) override { shards_.at(layer).gather(); }
  void release(size_t layer) override { shards_.at(layer).release(); }
  void add_gradients(size_t layer, const std::vector<at::Tensor>& gradients) override {
    shards_.at(layer).reduce_scatter_gradients(gradients);
  }

  dist::LayerShards& layer(size_t index) { return shards_.at(index); }
  size_t num_layers() const { return shards_.size(); }
  // The model's layers become full again (collective) and it forgets this source.
  void detach();

 private:
  model::CausalLm* model_;
  std::vector<dist::LayerShards> shards_;
};

}  // namespace ptrain::train
