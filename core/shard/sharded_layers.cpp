#include "core/shard/sharded_layers.h"

#include "core/model/model_transforms.h"
#include "ptrain/sdk/errors.h"

namespace ptrain::shard {

ShardedLayers::ShardedLayers(model::CausalLm& model, LayerCollectives& collectives, Use use)
    : model_(&model), collectives_(collectives), compute_dtype_(model.compute_dtype()) {
  // With adapters only they take gradients: the frozen base would stay whole on every rank.
  if (model.lora()) throw sdk::Error("sharding \"full\" does not support LoRA adapters");
  shards_.reserve(model.num_layers());
  for (size_t i = 0; i < model.num_layers(); ++i) {
    std::vector<at::Tensor> tensors = model.layer_tensors(i);
    // add_gradients() gets one gradient per trained tensor: they must be all of them.
    if (use == Use::kTrained && model.layer_parameters(i).size() != tensors.size()) {
      throw sdk::Error("sharding \"full\": layer " + std::to_string(i) + " of the policy holds frozen tensors");
    }
    for (const at::Tensor& tensor : tensors) held_.insert(tensor.unsafeGetTensorImpl());
    shards_.emplace_back(std::move(tensors), collectives.communicator(), use == Use::kTrained);
  }
  model::shard_layers(model, *this);
  id_ = collectives_.add(*this);
}

void ShardedLayers::gather(size_t layer) {
  if (held_whole_) return;
  if (prefetched_ == static_cast<int64_t>(layer)) {
    prefetched_ = -1;
    shards_.at(layer).finish_gather();
    return;
  }
  drop_prefetch();
  collectives_.announce(id_, LayerOperation::kGather, layer);
  shards_.at(layer).gather(compute_dtype_);
}

void ShardedLayers::prefetch(size_t layer) {
  if (held_whole_ || prefetched_ == static_cast<int64_t>(layer)) return;
  drop_prefetch();
  collectives_.announce(id_, LayerOperation::kGather, layer);
  shards_.at(layer).start_gather(compute_dtype_);
  prefetched_ = static_cast<int64_t>(layer);
}

void ShardedLayers::drop_prefetch() {
  if (prefetched_ < 0) return;
  // Not the layer asked for after all: wait (the peers run the same gather) and let it go.
  dist::LayerShards& shards = shards_.at(static_cast<size_t>(prefetched_));
  prefetched_ = -1;
  shards.finish_gather();
  shards.release();
}

void ShardedLayers::hold_whole() {
  for (size_t i = 0; i < shards_.size(); ++i) gather(i);
  held_whole_ = true;
}

void ShardedLayers::release_whole() {
  held_whole_ = false;
  for (dist::LayerShards& shards : shards_) shards.release();
}

void ShardedLayers::gather_exact(size_t layer) {
  drop_prefetch();
  collectives_.announce(id_, LayerOperation::kGatherExact, layer);
  shards_.at(layer).gather(at::kFloat);
}

void ShardedLayers::add_gradients(size_t layer, const std::vector<at::Tensor>& gradients) {
  collectives_.announce(id_, LayerOperation::kReduceScatter, layer);
  shards_.at(layer).reduce_scatter_gradients(gradients);
}

void ShardedLayers::join(LayerOperation operation, size_t layer) {
  dist::LayerShards& shards = shards_.at(layer);
  if (operation == LayerOperation::kGather) {
    shards.join_gather(compute_dtype_);
  } else if (operation == LayerOperation::kGatherExact) {
    shards.join_gather(at::kFloat);
  } else {
    shards.reduce_scatter_gradients(std::vector<at::Tensor>(shards.num_tensors()));  // zeros
  }
}

void ShardedLayers::blend_from(LayerParameterSource& other, double alpha) {
  auto* source = dynamic_cast<ShardedLayers*>(&other);
  if (source == nullptr || source->num_layers() != num_layers()) {
    throw sdk::Error("sharding \"full\": blending layers of models sharded differently");
  }
  for (size_t i = 0; i < shards_.size(); ++i) {
    at::Tensor& own = shards_[i].weight_shard();
    const at::Tensor& theirs = source->layer(i).weight_shard();
    if (own.numel() != theirs.numel()) {
      throw sdk::Error("sharding \"full\": layer " + std::to_string(i) + " is sharded differently in the two models");
    }
    own.mul_(1.0 - alpha).add_(theirs.to(own.scalar_type()), alpha);
  }
}

void ShardedLayers::zero_gradients() {
  for (dist::LayerShards& shards : shards_) shards.zero_gradients();
}

int64_t ShardedLayers::chunk_bytes() const {
  int64_t bytes = 0;
  for (const dist::LayerShards& shards : shards_) bytes += shards.chunk() * shards.element_size();
  return bytes;
}

void ShardedLayers::detach() {
  if (model_ == nullptr) return;
  for (size_t i = 0; i < shards_.size(); ++i) gather_exact(i);
  model::unshard_layers(*model_);
  model_ = nullptr;
}

}  // namespace ptrain::shard
