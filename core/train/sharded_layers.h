// Sharding "full" (ZeRO-3): every decoder layer of a model sharded over the
// ranks with dist::LayerShards, as the model's LayerParameterSource
// (causal_lm.h).
//
// A layer's gather and its gradients' reduce-scatter are collectives, but
// ranks issue different numbers of them: one has more microbatches, a longer
// generation or more evaluation examples than another. So each one is first
// announced to every rank in a small all-reduce ([1, code, code²] summed,
// code naming the operation and the layer): ranks that compute announce,
// and a rank that has reached its next other collective waits in drain(),
// announcing nothing and joining each announced operation with neutral
// inputs (its own chunk for a gather, zeros for a reduce-scatter) until
// every rank is draining. The run's other collectives go through a
// dist::DrainingCommunicator that calls drain() first. Two computing ranks
// announcing different operations (a plugin whose forwards differ by rank)
// get an sdk::Error naming both, not a hang.
#pragma once

#include "core/dist/communicator.h"
#include "core/dist/layer_shards.h"
#include "core/model/causal_lm.h"

#include <cstdint>
#include <vector>

namespace ptrain::train {

class ShardedLayers final : public model::CausalLm::LayerParameterSource {
 public:
  // Collective-free: keeps this rank's chunk of every layer (the same
  // values on every rank) and releases the layers' full tensors; attaches
  // itself to `model`, which it must not outlive while attached (detach()).
  // `communicator` is the run's own (not a DrainingCommunicator over it).
  // Throws sdk::Error for a model with LoRA adapters.
  ShardedLayers(model::CausalLm& model, dist::Communicator& communicator);

  void gather(size_t layer) override;
  void release(size_t layer) override { shards_.at(layer).release(); }
  void add_gradients(size_t layer, const std::vector<at::Tensor>& gradients) override;

  // Collective: joins every operation the other ranks announce until all of
  // them call drain() too.
  void drain();
  // Collective: every layer full at once (a checkpoint or final/ reads the
  // whole model), until release_all().
  void gather_all();
  void release_all();
  void zero_gradients();

  dist::LayerShards& layer(size_t index) { return shards_.at(index); }
  size_t num_layers() const { return shards_.size(); }
  // Bytes of this rank's weight chunks (its gradient chunks take as many).
  int64_t chunk_bytes() const;
  // The model's layers become full again (collective) and it forgets this source.
  void detach();

 private:
  enum class Operation : int64_t { kGather = 0, kReduceScatter = 1 };
  // Announces this rank's next operation; throws when a computing peer announced another.
  void announce(Operation operation, size_t layer);
  // Takes part in an operation a peer announced.
  void join(int64_t code);

  model::CausalLm* model_;
  dist::Communicator& communicator_;
  std::vector<dist::LayerShards> shards_;
};

// Every layer full while it lives (sharding "full"; nullptr: nothing to do).
// Collective on construction.
class WholeLayers {
 public:
  explicit WholeLayers(ShardedLayers* layers) : layers_(layers) {
    if (layers_ != nullptr) layers_->gather_all();
  }
  ~WholeLayers() {
    if (layers_ != nullptr) layers_->release_all();
  }
  WholeLayers(const WholeLayers&) = delete;
  WholeLayers& operator=(const WholeLayers&) = delete;

 private:
  ShardedLayers* layers_;
};

}  // namespace ptrain::train
