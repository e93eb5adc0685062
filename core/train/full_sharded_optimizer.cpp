#include "core/train/full_sharded_optimizer.h"

#include "core/checkpoint/state_pieces.h"
#include "core/train/update_step.h"
#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

namespace ptrain::train {

FullShardedOptimizer::FullShardedOptimizer(const config::OptimSection& optim,
                                           const std::vector<std::pair<std::string, at::Tensor>>& named_parameters,
                                           shard::ShardedLayers& layers, dist::Communicator& communicator,
                                           dist::GradientSynchronizer* replicated_sync)
    : layers_(layers),
      communicator_(communicator),
      is_adamw_(optim.name == config::OptimizerKind::kAdamW),
      has_momentum_(optim.momentum > 0.0) {
  std::vector<OptimizedTensor> tensors;
  std::map<const void*, std::string> names;
  std::vector<std::pair<std::string, at::Tensor>> replicated_named;
  for (const auto& [name, parameter] : named_parameters) {
    names.emplace(parameter.unsafeGetTensorImpl(), name);
    if (layers.holds(parameter)) continue;
    replicated_named.emplace_back(name, parameter);
  }
  if (replicated_sync != nullptr) {
    replicated_update_ = std::make_unique<ShardedUpdate>(optim, replicated_named, *replicated_sync, communicator);
  } else {
    for (const auto& [name, parameter] : replicated_named) {
      replicated_.push_back(parameter);
      replicated_names_.push_back(name);
      tensors.push_back({name, parameter, decays(optim, parameter)});
    }
  }
  for (size_t i = 0; i < layers.num_layers(); ++i) add_layer_pieces(optim, i, communicator.rank(), names, tensors);
  optimizer_ = std::make_unique<ParameterOptimizer>(optim, tensors);
}

FullShardedOptimizer::~FullShardedOptimizer() = default;

void FullShardedOptimizer::add_layer_pieces(const config::OptimSection& optim, size_t layer, int rank,
                                            const std::map<const void*, std::string>& names,
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
      const std::string key = "layer" + std::to_string(layer) + ".piece" + std::to_string(j);
      tensors.push_back({key, piece, decays(optim, like_whole)});
      piece_info_.push_back({key, names.at(shards.tensors()[j].unsafeGetTensorImpl()), lo - offset, lo == offset});
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
  if (replicated_update_) sharded[0] += replicated_update_->local_squared_norm();
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
    if (replicated_update_) replicated_update_->scale_gradients(scale);
  }
  return norm;
}

void FullShardedOptimizer::step(double lr) {
  optimizer_->step(lr);
  if (replicated_update_) replicated_update_->step(lr);
  for (size_t i = 0; i < layers_.num_layers(); ++i) layers_.layer(i).zero_gradients();
}

}  // namespace ptrain::train

namespace ptrain::train {

std::vector<std::string> FullShardedOptimizer::state_kinds() const {
  if (is_adamw_) return {"exp_avg", "exp_avg_sq"};
  if (has_momentum_) return {"momentum_buffer"};
  return {};
}

checkpoint::NamedTensors FullShardedOptimizer::state_tensors() const {
  const checkpoint::NamedTensors own_list = optimizer_->state_tensors();
  const std::map<std::string, at::Tensor> own(own_list.begin(), own_list.end());
  checkpoint::NamedTensors tensors;
  if (replicated_update_) tensors = replicated_update_->state_tensors();
  if (own.empty()) return tensors;
  if (communicator_.rank() == 0) {
    for (const std::string& name : replicated_names_) {
      for (const std::string& kind : state_kinds()) tensors.emplace_back(name + "." + kind, own.at(name + "." + kind));
      if (is_adamw_) tensors.emplace_back(name + ".step", own.at(name + ".step"));
    }
  }
  for (const Piece& piece : piece_info_) {
    for (const std::string& kind : state_kinds()) {
      tensors.emplace_back(checkpoint::piece_name(piece.parameter + "." + kind, piece.parameter_offset),
                           own.at(piece.key + "." + kind));
    }
    // Once per tensor; a tensor split between ranks gets it from each, alike.
    if (is_adamw_ && piece.first_of_parameter)
      tensors.emplace_back(piece.parameter + ".step", own.at(piece.key + ".step"));
  }
  return tensors;
}

void FullShardedOptimizer::load_state_tensors(const checkpoint::NamedTensors& tensors) {
  const std::map<std::string, at::Tensor> by_name(tensors.begin(), tensors.end());
  checkpoint::NamedTensors own;
  for (const std::string& name : replicated_names_) {
    for (const std::string& kind : state_kinds()) {
      const auto found = by_name.find(name + "." + kind);
      if (found != by_name.end()) own.emplace_back(name + "." + kind, found->second);
    }
    const auto step = by_name.find(name + ".step");
    if (step != by_name.end()) own.emplace_back(name + ".step", step->second);
  }
  for (size_t k = 0; k < piece_info_.size(); ++k) {
    const Piece& piece = piece_info_[k];
    // Never stepped: no state (ParameterOptimizer saves none either).
    if (by_name.count(piece.parameter + "." + (is_adamw_ ? "step" : "momentum_buffer")) == 0) continue;
    if (is_adamw_) own.emplace_back(piece.key + ".step", by_name.at(piece.parameter + ".step"));
    for (const std::string& kind : state_kinds()) {
      const auto found = by_name.find(piece.parameter + "." + kind);
      if (found == by_name.end()) {
        throw sdk::Error("optimizer state: tensor '" + piece.parameter + "." + kind + "' is missing");
      }
      own.emplace_back(piece.key + "." + kind,
                       found->second.reshape({-1}).narrow(0, piece.parameter_offset, pieces_[k].numel()));
    }
  }
  optimizer_->load_state_tensors(own);
  if (replicated_update_) replicated_update_->load_state_tensors(tensors);
}

}  // namespace ptrain::train
