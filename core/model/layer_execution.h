// How a model's forward runs each decoder layer, chosen once when the run
// is built (model_transforms.h) so that CausalLm::hidden_states is the
// layers and nothing else:
//   plain          the layer's forward, activations kept for backward;
//   checkpointed   activation checkpointing (layer_checkpoint.h) when the
//                  forward records gradients;
//   gathered       sharding "full": the layer's parameters gathered from a
//                  LayerParameterSource around its forward, recomputed in
//                  backward (gathered again) when the layers train or
//                  checkpointing was asked for.
#pragma once

#include "core/model/decoder.h"
#include "core/model/layer_parameter_source.h"

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <memory>

namespace ptrain::model {

class LayerExecution {
 public:
  virtual ~LayerExecution() = default;
  // Decoder layer `index` of `decoder`: [B, T, H] → [B, T, H].
  virtual at::Tensor run_layer(const Decoder& decoder, size_t index, const at::Tensor& x,
                               const AttentionLayout& layout) const = 0;
  // Where the layers' parameters are gathered from; nullptr: they are held whole.
  virtual LayerParameterSource* layer_source() const { return nullptr; }
  // Activation checkpointing was asked for (kept when sharding changes).
  virtual bool checkpoints_activations() const { return false; }
};

std::unique_ptr<LayerExecution> plain_layers();
std::unique_ptr<LayerExecution> checkpointed_layers();
// `source` outlives every forward and backward run with it.
std::unique_ptr<LayerExecution> gathered_layers(LayerParameterSource& source, bool checkpoint_activations);

}  // namespace ptrain::model
