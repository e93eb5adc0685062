// The modes a run applies to its model once, when it is built (as
// torchtitan's parallelize step): activation checkpointing, sharding
// "full" of the decoder layers and the compute precision. Each picks how
// the model runs (layer_execution.h) rather than adding a branch to its
// forward; checkpointing and sharding compose in either order.
#pragma once

#include "core/model/causal_lm.h"
#include "core/model/layer_parameter_source.h"

#include <c10/core/ScalarType.h>

#include <memory>

namespace ptrain::model {

// Activation checkpointing on (or off again): each decoder layer keeps only
// its input during a forward that records gradients and is recomputed in
// backward (layer_checkpoint.h). Same gradients.
void apply_activation_checkpointing(CausalLm& model, bool enabled = true);

// Sharding "full": the decoder layers' parameters come from `source`
// (layer_parameter_source.h), which outlives the model's forwards and
// backwards, or, given by unique_ptr, is owned by the model from now on (a
// frozen reference's).
void shard_layers(CausalLm& model, LayerParameterSource& source);
void shard_layers(CausalLm& model, std::unique_ptr<LayerParameterSource> source);
// The layers held whole again (the source detached); checkpointing stays.
void unshard_layers(CausalLm& model);

// The dtype the matrix products read their operands in: float32, or
// bfloat16 under bf16-mixed (CausalLm::set_compute_dtype).
void apply_precision(CausalLm& model, at::ScalarType compute_dtype);

}  // namespace ptrain::model
