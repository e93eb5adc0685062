#include "core/train/full_sharded_optimizer.h"

#include "core/train/update_step.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace ptrain::train {

FullShardedOptimizer::FullShardedOptimizer(const config::OptimSection& optim,
                                           const std::vector<std::pair<std::string, at::Tensor>>& named_parameters,
                                           ShardedLayers& layers, dist::Communicator& communicator)
    : layers_(layers), communicator_(communicator) {
  std::set<const void*> in_layers;
  for (size_t i = 0; i < layers.num_layers(); ++i) {
    for (const at::Tensor& tensor : layers.layer(i).tensors()) in_layers.insert(tensor.unsafeGetTensorImpl());
  }
  std::vector<OptimizedTensor> tensors;
  for (const auto& [name, parameter] : named_parameters) {
    if (in_layers.count(parameter.unsafeGetTensorImpl()) != 0) continue;
    replicated_.push_back(parameter);
    tensors.push_back({name, parameter, decays(optim, parameter)});
  }
  for (size_t i = 0; i < layers.num_layers(); ++i) add_layer_pieces(optim, i, communicator.rank(), tensors);
  optimizer_ = std::make_unique<ParameterOptimizer>(optim, tensors);
}

FullShardedOptimizer::~FullShardedOptimizer() = default;

void FullShardedOptimizer::add_layer_pieces(const config::OptimSection& optim, size_t layer, int rank,
                                            std::vector<OptimizedTensor>& tensors) {
  dist::LayerShards& shards = layers_.layer(layer);
  const int64_t begin = rank * shards.chunk(), end = begin + shards.chunk();
  int64_t offset = 0;  // of tensor j in the layer's concatenation
  for (size_t j = 0; j < shards.num_tensors(); ++j) {
    const std::vector<int64_t>& shape = shards.shape(j);
    int64_t numel = 1;
    for (const int64_t size : shape) numel *= size;
    const int64_t lo = std::max(offset, begin), hi = std::min(offset + numel, end);
    if (lo < hi) {
      at::Tensor piece = shards.weight_shard().narrow(0, lo - begin, hi - lo);
      piece.mutable_grad() = shards.gradient_shard().narrow(0, lo - begin, hi - lo);
      pieces_.push_back(piece);
      // A piece is 1-D: the decay group follows the whole tensor's shape.
      const at::Tensor like_whole = at::empty(shape, at::TensorOptions().device(at::kMeta));
      tensors.push_back(
          {"layer" + std::to_string(layer) + ".piece" + std::to_string(j), piece, decays(optim, like_whole)});
    }
    offset += numel;
  }
}

double FullShardedOptimizer::clip_grad_norm(double max_norm) {
  // The chunks' padding is zero, so their sum of squares is the pieces'.
  std::vector<at::Tensor> sharded{at::zeros({}, at::kDouble)};
  for (size_t i = 0; i < layers_.num_layers(); ++i) {
    sharded[0] += layers_.layer(i).gradient_shard().pow(2).sum().to(at::kCPU, at::kDouble);
  }
  communicator_.all_reduce_sum(sharded);
  double squared = sharded[0].item<double>();
  for (const at::Tensor& parameter : replicated_) {
    if (parameter.grad().defined()) squared += parameter.grad().pow(2).sum().to(at::kDouble).item<double>();
  }
  const double norm = std::sqrt(squared);
  if (max_norm > 0.0 && std::isfinite(norm) && norm > max_norm) {
    const double scale = max_norm / (norm + 1e-6);  // as train::clip_grad_norm
    for (const at::Tensor& parameter : replicated_) {
      if (parameter.grad().defined()) parameter.grad().mul_(scale);
    }
    for (size_t i = 0; i < layers_.num_layers(); ++i) layers_.layer(i).gradient_shard().mul_(scale);
  }
  return norm;
}

void FullShardedOptimizer::step(double lr) {
  optimizer_->step(lr);
  for (size_t i = 0; i < layers_.num_layers(); ++i) layers_.layer(i).zero_gradients();
}

}  // namespace ptrain::train
