// Sharding "full" (ZeRO-3): every decoder layer of a model sharded over the
// ranks with dist::LayerShards, as the model's LayerParameterSource
// (causal_lm.h). The policy's layers train (their gradients are
// reduce-scattered into each rank's chunk); a frozen reference's are only
// gathered for its forwards. Every gather and reduce-scatter is announced
// through the run's LayerCollectives (layer_collectives.h), so ranks that run
// different numbers of forwards stay in step.
#pragma once

#include "core/dist/layer_shards.h"
#include "core/model/causal_lm.h"
#include "core/shard/layer_collectives.h"

#include <cstdint>
#include <set>
#include <vector>

namespace ptrain::shard {

class ShardedLayers final : public model::CausalLm::LayerParameterSource, public LayerCollectives::Participant {
 public:
  enum class Use { kTrained, kFrozen };
  // Collective-free: keeps this rank's chunk of every layer (the same values
  // on every rank) and releases the layers' full tensors; attaches itself to
  // `model`, which it must not outlive while attached (detach()).
  // `collectives` outlives this object. Throws sdk::Error for a model with
  // LoRA adapters, or a trained one whose layers hold frozen tensors.
  ShardedLayers(model::CausalLm& model, LayerCollectives& collectives, Use use = Use::kTrained);
  ~ShardedLayers() override { collectives_.remove(id_); }
  ShardedLayers(const ShardedLayers&) = delete;
  ShardedLayers& operator=(const ShardedLayers&) = delete;

  // For the model's forwards: under bf16-mixed the matrices arrive rounded
  // to bfloat16, as its matrix products read them (dist::LayerShards::gather).
  void gather(size_t layer) override;
  // Collective: the layer's float32 master weights, exactly (a save).
  void gather_exact(size_t layer);
  // Announces the layer's gather and starts it; the gather() of that layer
  // that follows only waits for it. Any other layer operation first waits
  // out an unused prefetch.
  void prefetch(size_t layer) override;
  // Collective: gathers every layer (announced, as forwards do).
  void hold_whole() override;
  void release_whole() override;
  void release(size_t layer) override {
    if (!held_whole_) shards_.at(layer).release();
  }
  void add_gradients(size_t layer, const std::vector<at::Tensor>& gradients) override;
  void join(LayerOperation operation, size_t layer) override;
  // Throws sdk::Error unless `other` is a ShardedLayers of the same layout.
  void blend_from(LayerParameterSource& other, double alpha) override;

  void zero_gradients();

  dist::LayerShards& layer(size_t index) { return shards_.at(index); }
  size_t num_layers() const { return shards_.size(); }
  // Whether `tensor` is one of the layers' tensors (else it stays replicated).
  bool holds(const at::Tensor& tensor) const { return held_.count(tensor.unsafeGetTensorImpl()) != 0; }
  // Bytes of this rank's weight chunks (a trained model's gradient chunks take as many).
  int64_t chunk_bytes() const;
  // The model's layers become full again (collective) and it forgets this source.
  void detach();

 private:
  model::CausalLm* model_;
  LayerCollectives& collectives_;
  std::vector<dist::LayerShards> shards_;
  std::set<const void*> held_;  // the layers' tensors, by implementation
  at::ScalarType compute_dtype_;  // the model's, as this source was attached
  int64_t prefetched_ = -1;       // the layer whose gather is in flight; -1: none
  bool held_whole_ = false;

  void drop_prefetch();
  int id_;
};

}  // namespace ptrain::shard
