// Sharding "full" (ZeRO-3): where a model's decoder layers' parameters live
// between uses (dist::LayerShards behind it). A model sharded with
// model_transforms.h's shard_layers gathers each layer's parameters for its
// forward, runs it and releases them, keeping only its input as activation
// checkpointing does; its backward gathers them again, recomputes the layer
// and hands the parameters' gradients to the source (none reach their
// .grad) before releasing them.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ptrain::model {

class LayerParameterSource {
 public:
  virtual ~LayerParameterSource() = default;
  virtual void gather(size_t layer) = 0;
  virtual void release(size_t layer) = 0;
  // One per layer_parameters(layer) tensor, in order; undefined: no gradient.
  virtual void add_gradients(size_t layer, const std::vector<at::Tensor>& gradients) = 0;
  // This ← (1 − alpha)·this + alpha·other, layer by layer, for a source
  // sharded alike (soft_update_from). Collective-free.
  virtual void blend_from(LayerParameterSource& other, double alpha) = 0;
  // `layer` is gathered next: its gather may start now, to overlap with
  // the current layer's compute (the forwards' order: ascending; backward's:
  // descending). The default starts nothing.
  virtual void prefetch(size_t /*layer*/) {}
  // Every layer whole until release_whole(); the gathers and releases in
  // between do nothing (generation with the whole model at hand). The
  // defaults do nothing.
  virtual void hold_whole() {}
  virtual void release_whole() {}
};

// Gathers layer `index` of `num_layers` and starts the gather of layer
// `index` + `direction` (+1 in forwards, −1 in backward) when there is one.
inline void gather_layer(LayerParameterSource& source, size_t index, int direction, size_t num_layers) {
  source.gather(index);
  const auto next = static_cast<int64_t>(index) + direction;
  if (next >= 0 && next < static_cast<int64_t>(num_layers)) source.prefetch(static_cast<size_t>(next));
}

}  // namespace ptrain::model
