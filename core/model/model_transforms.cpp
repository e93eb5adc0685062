#include "core/model/model_transforms.h"

#include "core/model/layer_execution.h"

#include <utility>

namespace ptrain::model {

void apply_activation_checkpointing(CausalLm& model, bool enabled) {
  LayerParameterSource* source = model.layer_execution_->layer_source();
  if (source != nullptr) {
    model.layer_execution_ = gathered_layers(*source, enabled);
  } else {
    model.layer_execution_ = enabled ? checkpointed_layers() : plain_layers();
  }
}

void shard_layers(CausalLm& model, LayerParameterSource& source) {
  model.layer_execution_ = gathered_layers(source, model.layer_execution_->checkpoints_activations());
}

void shard_layers(CausalLm& model, std::unique_ptr<LayerParameterSource> source) {
  shard_layers(model, *source);
  model.owned_layer_source_ = std::move(source);
}

void unshard_layers(CausalLm& model) {
  model.layer_execution_ = model.layer_execution_->checkpoints_activations() ? checkpointed_layers() : plain_layers();
}

void apply_precision(CausalLm& model, at::ScalarType compute_dtype) { model.set_compute_dtype(compute_dtype); }

}  // namespace ptrain::model
