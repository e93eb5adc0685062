#include "core/train/sharded_layers.h"

#include "ptrain/sdk/errors.h"

namespace ptrain::train {

ShardedLayers::ShardedLayers(model::CausalLm& model, dist::Communicator& communicator) : model_(&model) {
  // With adapters only they take gradients: the frozen base would stay whole on every rank.
  if (model.lora()) throw sdk::Error("sharding \"full\" does not support LoRA adapters");
  shards_.reserve(model.num_layers());
  for (size_t i = 0; i < model.num_layers(); ++i) shards_.emplace_back(model.layer_parameters(i), communicator);
  model.set_layer_parameter_source(this);
}

void ShardedLayers::detach() {
  if (model_ == nullptr) return;
  for (dist::LayerShards& shards : shards_) shards.gather();
  model_->set_layer_parameter_source(nullptr);
  model_ = nullptr;
}

}  // namespace ptrain::train
