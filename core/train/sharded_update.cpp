#include "core/train/sharded_update.h"

#include "core/checkpoint/state_pieces.h"
#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>

#include <cmath>
#include <map>

namespace ptrain::train {

ShardedUpdate::ShardedUpdate(const config::OptimSection& optim,
                             const std::vector<std::pair<std::string, at::Tensor>>& named_parameters,
                             dist::GradientSynchronizer& grad_sync, dist::Communicator& communicator)
    : named_parameters_(named_parameters),
      grad_sync_(grad_sync),
      communicator_(communicator),
      is_adamw_(optim.name == config::OptimizerKind::kAdamW),
      has_momentum_(optim.momentum > 0.0) {
  std::vector<OptimizedTensor> tensors;
  const std::vector<dist::ShardPiece>& pieces = grad_sync.pieces();
  for (size_t k = 0; k < pieces.size(); ++k) {
    const dist::ShardPiece& piece = pieces[k];
    const auto& [name, parameter] = named_parameters_[piece.parameter];
    TORCH_CHECK(parameter.is_contiguous(), "sharded update: parameter ", name, " is not contiguous");
    at::Tensor weights = parameter.detach().view({-1}).narrow(0, piece.parameter_offset, piece.numel);
    weights.mutable_grad() = grad_sync.gradient_shard(piece.bucket).narrow(0, piece.chunk_offset, piece.numel);
    piece_weights_.push_back(weights);
    // A piece of a matrix is 1-D: the decay group follows the whole parameter.
    tensors.push_back({optimizer_key(k), weights, decays(optim, parameter)});
  }
  optimizer_ = std::make_unique<ParameterOptimizer>(optim, tensors);
}

double ShardedUpdate::local_squared_norm() const {
  // The padding of the shards is zero, so the shards' sum of squares is the pieces'.
  at::Tensor squared_sum = at::zeros({}, at::kDouble);
  for (size_t b = 0; b < grad_sync_.layout().size(); ++b) {
    squared_sum += grad_sync_.gradient_shard(b).pow(2).sum().to(at::kCPU, at::kDouble);
  }
  return squared_sum.item<double>();
}

void ShardedUpdate::scale_gradients(double scale) {
  for (size_t b = 0; b < grad_sync_.layout().size(); ++b) grad_sync_.gradient_shard(b).mul_(scale);
}

double ShardedUpdate::clip_grad_norm(double max_norm) {
  std::vector<at::Tensor> squared_sum{at::scalar_tensor(local_squared_norm(), at::kDouble)};
  communicator_.all_reduce_sum(squared_sum);
  const double norm = std::sqrt(squared_sum[0].item<double>());
  // As train::clip_grad_norm, so "none" scales alike.
  if (max_norm > 0.0 && std::isfinite(norm) && norm > max_norm) scale_gradients(max_norm / (norm + 1e-6));
  return norm;
}

void ShardedUpdate::step(double lr) {
  optimizer_->step(lr);
  grad_sync_.gather_parameters();
  ++steps_taken_;
}

std::vector<std::string> ShardedUpdate::state_kinds() const {
  if (is_adamw_) return {"exp_avg", "exp_avg_sq"};
  if (has_momentum_) return {"momentum_buffer"};
  return {};
}

checkpoint::NamedTensors ShardedUpdate::state_tensors() const {
  checkpoint::NamedTensors tensors;
  const std::vector<std::string> kinds = state_kinds();
  if (steps_taken_ == 0 || kinds.empty()) return tensors;
  const checkpoint::NamedTensors own_list = optimizer_->state_tensors();
  const std::map<std::string, at::Tensor> own(own_list.begin(), own_list.end());
  const std::vector<dist::ShardPiece>& pieces = grad_sync_.pieces();
  for (size_t k = 0; k < pieces.size(); ++k) {
    const std::string& name = named_parameters_[pieces[k].parameter].first;
    for (const std::string& kind : kinds) {
      tensors.emplace_back(checkpoint::piece_name(name + "." + kind, pieces[k].parameter_offset),
                           own.at(optimizer_key(k) + "." + kind));
    }
    // Once per parameter; a parameter split between ranks gets it from each, alike.
    const bool first_piece = k == 0 || pieces[k - 1].parameter != pieces[k].parameter;
    if (is_adamw_ && first_piece) tensors.emplace_back(name + ".step", at::scalar_tensor(steps_taken_, at::kLong));
  }
  return tensors;
}

void ShardedUpdate::load_state_tensors(const checkpoint::NamedTensors& tensors) {
  const std::map<std::string, at::Tensor> by_name(tensors.begin(), tensors.end());
  const std::vector<std::string> kinds = state_kinds();
  checkpoint::NamedTensors piece_state;
  const std::vector<dist::ShardPiece>& pieces = grad_sync_.pieces();
  for (size_t k = 0; k < pieces.size(); ++k) {
    const auto& [name, parameter] = named_parameters_[pieces[k].parameter];
    // Never stepped: no state (ParameterOptimizer saves none either).
    if (by_name.count(name + "." + (is_adamw_ ? "step" : "momentum_buffer")) == 0) continue;
    if (is_adamw_) {
      piece_state.emplace_back(optimizer_key(k) + ".step", by_name.at(name + ".step"));
    }
    for (const std::string& kind : kinds) {
      const auto found = by_name.find(name + "." + kind);
      if (found == by_name.end()) throw sdk::Error("optimizer state: tensor '" + name + "." + kind + "' is missing");
      // Whole, or flattened when joined from shards (checkpoint/state_pieces.h).
      if (found->second.numel() != parameter.numel()) {
        throw sdk::Error("optimizer state: tensor '" + name + "." + kind + "' has the wrong shape");
      }
      piece_state.emplace_back(optimizer_key(k) + "." + kind,
                               found->second.reshape({-1}).narrow(0, pieces[k].parameter_offset, pieces[k].numel));
    }
  }
  optimizer_->load_state_tensors(piece_state);
  // From the whole state, not this rank's pieces: every rank must agree on
  // it, as state_tensors() is collective only when it is not 0.
  steps_taken_ = 0;
  for (const auto& [name, parameter] : named_parameters_) {
    const auto found = by_name.find(name + "." + (is_adamw_ ? "step" : "momentum_buffer"));
    if (found == by_name.end()) continue;
    steps_taken_ = is_adamw_ ? found->second.item<int64_t>() : 1;
    break;
  }
}

}  // namespace ptrain::train
