// Activation checkpointing (Chen et al. 2016, "Training Deep Nets with
// Sublinear Memory Cost"): a decoder layer keeps only its input during the
// forward pass and runs again in backward to rebuild what its gradient needs.
// Activations then cost one [B, T, H] tensor per layer instead of every
// intermediate, for one extra layer forward per backward. The recomputation
// is deterministic (LoRA's dropout masks are drawn again from the same seed),
// so gradients are the same.
#pragma once

#include "core/model/decoder.h"
#include "core/model/layer_parameter_source.h"

#include <ATen/core/Tensor.h>

#include <cstddef>

namespace ptrain::model {

// Decoder layer `index` without keeping activations; recomputed in backward.
// With a `source` (sharding "full"), the layer's parameters are gathered
// around its forward and its recomputation, and their gradients go to the
// source instead of their .grad. `decoder` and `source` outlive the backward.
at::Tensor checkpointed_layer(const Decoder& decoder, LayerParameterSource* source, size_t index, const at::Tensor& x,
                              const AttentionLayout& layout);

}  // namespace ptrain::model
