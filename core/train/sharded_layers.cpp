#include "core/train/sharded_layers.h"

#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>

#include <string>

namespace ptrain::train {
namespace {

struct Announcements {
  int64_t count = 0;   // ranks announcing
  int64_t sum = 0;     // of their codes
  int64_t sum_sq = 0;  // of their squared codes: equals count·code² only when all codes are equal
};

Announcements exchange(dist::Communicator& communicator, int64_t count, int64_t code) {
  std::vector<at::Tensor> values{at::tensor({count, count * code, count * code * code}, at::kLong)};
  communicator.all_reduce_sum(values);
  const at::Tensor summed = values[0].contiguous();
  return {summed[0].item<int64_t>(), summed[1].item<int64_t>(), summed[2].item<int64_t>()};
}

std::string describe(int64_t code, size_t num_layers) {
  const auto layers = static_cast<int64_t>(num_layers);
  return std::string(code / layers == 0 ? "gather" : "gradient reduce-scatter") + " of layer " +
         std::to_string(code % layers);
}

}  // namespace

ShardedLayers::ShardedLayers(model::CausalLm& model, dist::Communicator& communicator)
    : model_(&model), communicator_(communicator) {
  // With adapters only they take gradients: the frozen base would stay whole on every rank.
  if (model.lora()) throw sdk::Error("sharding \"full\" does not support LoRA adapters");
  shards_.reserve(model.num_layers());
  for (size_t i = 0; i < model.num_layers(); ++i) shards_.emplace_back(model.layer_parameters(i), communicator);
  model.set_layer_parameter_source(this);
}

void ShardedLayers::gather(size_t layer) {
  announce(Operation::kGather, layer);
  shards_.at(layer).gather();
}

void ShardedLayers::add_gradients(size_t layer, const std::vector<at::Tensor>& gradients) {
  announce(Operation::kReduceScatter, layer);
  shards_.at(layer).reduce_scatter_gradients(gradients);
}

void ShardedLayers::announce(Operation operation, size_t layer) {
  if (communicator_.world_size() == 1) return;
  const int64_t code = static_cast<int64_t>(operation) * static_cast<int64_t>(shards_.size()) +
                       static_cast<int64_t>(layer);
  const Announcements seen = exchange(communicator_, 1, code);
  if (seen.sum != seen.count * code || seen.sum_sq != seen.count * code * code) {
    throw sdk::Error("sharding \"full\": rank " + std::to_string(communicator_.rank()) + " runs the " +
                     describe(code, shards_.size()) +
                     " while another rank runs a different layer operation; every rank must run the same "
                     "sequence of forwards (a plugin's forwards may not depend on the rank's data)");
  }
}

void ShardedLayers::drain() {
  if (communicator_.world_size() == 1) return;
  for (;;) {
    const Announcements seen = exchange(communicator_, 0, 0);
    if (seen.count == 0) return;
    const int64_t code = seen.sum / seen.count;
    if (seen.sum != seen.count * code || seen.sum_sq != seen.count * code * code) {
      throw sdk::Error("sharding \"full\": ranks run different layer operations at once; every rank must run "
                       "the same sequence of forwards (a plugin's forwards may not depend on the rank's data)");
    }
    join(code);
  }
}

void ShardedLayers::join(int64_t code) {
  const auto layers = static_cast<int64_t>(shards_.size());
  dist::LayerShards& shards = shards_.at(static_cast<size_t>(code % layers));
  if (code / layers == static_cast<int64_t>(Operation::kGather)) {
    shards.join_gather();
  } else {
    shards.reduce_scatter_gradients(std::vector<at::Tensor>(shards.num_tensors()));  // zeros
  }
}

void ShardedLayers::gather_all() {
  for (size_t i = 0; i < shards_.size(); ++i) gather(i);
}

void ShardedLayers::release_all() {
  for (dist::LayerShards& shards : shards_) shards.release();
}

void ShardedLayers::zero_gradients() {
  for (dist::LayerShards& shards : shards_) shards.zero_gradients();
}

int64_t ShardedLayers::chunk_bytes() const {
  int64_t bytes = 0;
  for (const dist::LayerShards& shards : shards_) bytes += shards.chunk() * static_cast<int64_t>(sizeof(float));
  return bytes;
}

void ShardedLayers::detach() {
  if (model_ == nullptr) return;
  for (size_t i = 0; i < shards_.size(); ++i) gather(i);
  model_->set_layer_parameter_source(nullptr);
  model_ = nullptr;
}

}  // namespace ptrain::train
