#include "worker_layer_shards.h"

#include "core/checkpoint/state_pieces.h"
#include "core/dist/c10d_communicator.h"
#include "core/dist/draining_communicator.h"
#include "core/model/safetensors.h"
#include "core/shard/sharded_layers.h"
#include "core/train/full_sharded_optimizer.h"
#include "core/train/update_step.h"
#include "ptrain/sdk/errors.h"
#include "support/sft_reference.h"
#include "support/test_util.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <vector>

namespace ptrain::dist_test {
namespace {

constexpr uint64_t kModelSeed = 7;
constexpr int kMicrobatches = 2;

// Rank `rank`'s microbatch `m`: [2, 9] token ids, different for every pair.
at::Tensor batch(int rank, int m) {
  return (at::arange(18, at::kLong).view({2, 9}) * (3 + 2 * rank + 5 * m) + rank + 11 * m).remainder(259);
}

// Any differentiable scalar of the logits: a sum of log-probabilities.
at::Tensor loss_of(model::CausalLm& model, int rank, int m) {
  return at::log_softmax(model.logits(batch(rank, m)), -1).select(-1, 5).sum();
}

std::vector<at::Tensor> flattened(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> flat;
  for (const at::Tensor& tensor : tensors) flat.push_back(tensor.reshape({-1}));
  return flat;
}

// This rank's chunk of layer `layer`'s gradients, concatenated and zero-padded.
at::Tensor gradient_chunk(const model::CausalLm& model, size_t layer, int rank, int64_t chunk, int world) {
  std::vector<at::Tensor> grads;
  for (const at::Tensor& parameter : model.layer_parameters(layer)) grads.push_back(parameter.grad());
  at::Tensor all = at::cat(flattened(grads));
  all = at::cat({all, at::zeros({chunk * world - all.numel()}, all.options())});
  return all.narrow(0, rank * chunk, chunk);
}

double relative_error(const at::Tensor& got, const at::Tensor& expected) {
  return (got - expected).abs().max().item<double>() / expected.abs().max().item<double>();
}

namespace fs = std::filesystem;

// AdamW with weight decay; clip_grad_norm far below the gradient norms, so every step clips.
config::OptimSection adamw() {
  config::OptimSection optim;
  optim.lr = 1e-2;
  optim.weight_decay = 0.1;
  optim.beta1 = 0.9;
  optim.beta2 = 0.999;
  optim.eps = 1e-8;
  optim.clip_grad_norm = 0.05;
  return optim;
}

void zero_gradients(const std::vector<std::pair<std::string, at::Tensor>>& named) {
  for (const auto& [name, parameter] : named) {
    if (parameter.grad().defined()) parameter.mutable_grad().zero_();
  }
}

}  // namespace

namespace {

// A sharded model and an unsharded copy trained side by side: the sharded
// one on this rank's microbatches (its replicated tensors' gradients
// all-reduced here, as GradientSynchronizer would), the copy on every rank's.
struct SideBySide {
  dist::Communicator& communicator;
  int rank, world;
  std::unique_ptr<model::CausalLm> sharded = model::CausalLm::init_random(testing::tiny_model_config(), kModelSeed);
  std::unique_ptr<model::CausalLm> reference = model::CausalLm::init_random(testing::tiny_model_config(), kModelSeed);
  std::vector<std::pair<std::string, at::Tensor>> sharded_named = sharded->named_parameters();
  std::vector<std::pair<std::string, at::Tensor>> reference_named = reference->named_parameters();
  std::vector<at::Tensor> reference_parameters = testing::parameters_of(*reference);
  train::ParameterOptimizer reference_optimizer{adamw(), reference_named};

  void sum_replicated_gradients() {
    std::vector<at::Tensor> grads;
    for (const auto& [name, parameter] : sharded_named) {
      if (parameter.grad().defined()) grads.push_back(parameter.grad());
    }
    std::vector<at::Tensor> flat{at::cat(flattened(grads))};  // Gloo sums same-shape lists only
    communicator.all_reduce_sum(flat);
    int64_t offset = 0;
    for (at::Tensor& grad : grads) {
      grad.copy_(flat[0].narrow(0, offset, grad.numel()).view(grad.sizes()));
      offset += grad.numel();
    }
  }

  // One step of both; returns the relative difference of their gradient norms.
  double step(train::FullShardedOptimizer& sharded_optimizer, double& reference_norm) {
    zero_gradients(sharded_named);
    zero_gradients(reference_named);
    for (int m = 0; m < kMicrobatches; ++m) {
      loss_of(*sharded, rank, m).backward();
      for (int r = 0; r < world; ++r) loss_of(*reference, r, m).backward();
    }
    sum_replicated_gradients();
    const double sharded_norm = sharded_optimizer.clip_grad_norm(adamw().clip_grad_norm);
    reference_norm = train::clip_grad_norm(reference_parameters, adamw().clip_grad_norm);
    sharded_optimizer.step(adamw().lr);
    reference_optimizer.step(adamw().lr);
    return std::abs(sharded_norm - reference_norm) / reference_norm;
  }

  double weight_error() const {
    return testing::relative_error(testing::parameters_of(*sharded), reference_parameters);
  }
};

// Every rank's state_tensors() through its own file, joined as a resume joins them.
checkpoint::NamedTensors joined_state(const train::FullShardedOptimizer& optimizer, const fs::path& dir,
                                      dist::Communicator& communicator) {
  const int world = communicator.world_size();
  model::write_safetensors(dir / checkpoint::optimizer_shard_file(communicator.rank(), world),
                           optimizer.state_tensors());
  communicator.barrier();
  std::vector<checkpoint::NamedTensors> parts;
  for (int r = 0; r < world; ++r) {
    parts.push_back(model::read_safetensors(dir / checkpoint::optimizer_shard_file(r, world)));
  }
  return checkpoint::join_pieces(parts, dir.string());
}

// The largest relative difference from the unsharded optimizer's state; 1e30
// for a missing or extra tensor or a different step count.
double state_error(const checkpoint::NamedTensors& joined, const checkpoint::NamedTensors& expected) {
  const std::map<std::string, at::Tensor> by_name(joined.begin(), joined.end());
  if (by_name.size() != expected.size()) return 1e30;
  double error = 0.0;
  for (const auto& [name, tensor] : expected) {
    const auto found = by_name.find(name);
    if (found == by_name.end()) return 1e30;
    const at::Tensor got = found->second.reshape(tensor.sizes());
    if (tensor.scalar_type() == at::kLong) {
      if (!got.equal(tensor)) return 1e30;
      continue;
    }
    error = std::max(error, testing::relative_error({got}, {tensor}));
  }
  return error;
}

}  // namespace

// 3 AdamW steps side by side; the sharded optimizer's state, written per rank
// and joined, against the unsharded one's; then a fourth step after resharding
// the model and loading the joined state into a new sharded optimizer.
int run_full_adamw(const dist::LaunchEnv& launch, const fs::path& dir) {
  constexpr int kSteps = 3;
  auto communicator = dist::make_communicator(launch, std::chrono::seconds(30));
  SideBySide run{*communicator, launch.rank, launch.world_size};
  double norm_error = 0.0, smallest_norm = 1e30, reference_norm = 0.0;
  shard::LayerCollectives collectives(*communicator);
  auto layers = std::make_unique<shard::ShardedLayers>(*run.sharded, collectives);
  auto optimizer = std::make_unique<train::FullShardedOptimizer>(adamw(), run.sharded_named, *layers, *communicator);
  for (int step = 0; step < kSteps; ++step) {
    norm_error = std::max(norm_error, run.step(*optimizer, reference_norm));
    smallest_norm = std::min(smallest_norm, reference_norm);
  }
  const checkpoint::NamedTensors joined = joined_state(*optimizer, dir, *communicator);
  const double optimizer_state_error = state_error(joined, run.reference_optimizer.state_tensors());
  layers->detach();
  const double weight_error = run.weight_error();
  const auto initial = model::CausalLm::init_random(testing::tiny_model_config(), kModelSeed);
  const double moved = testing::relative_error(testing::parameters_of(*initial), run.reference_parameters);

  layers.reset();  // one sharded model at a time
  layers = std::make_unique<shard::ShardedLayers>(*run.sharded, collectives);
  optimizer = std::make_unique<train::FullShardedOptimizer>(adamw(), run.sharded_named, *layers, *communicator);
  optimizer->load_state_tensors(joined);
  run.step(*optimizer, reference_norm);
  layers->detach();
  std::cout << "RESULT "
            << nlohmann::json{{"rank", launch.rank},
                              {"norm_error", norm_error},
                              {"weight_error", weight_error},
                              {"moved", moved},
                              {"smallest_norm", smallest_norm},
                              {"state_error", optimizer_state_error},
                              {"resumed_error", run.weight_error()}}
                   .dump()
            << std::endl;
  return 0;
}

// Sharded model: this rank's microbatches. References, unsharded: `everyone`
// runs every rank's microbatches (the summed layer gradients), `local` this
// rank's only (its replicated tensors' gradients and its losses).
int run_sharded_layers(const dist::LaunchEnv& launch) {
  auto communicator = dist::make_communicator(launch, std::chrono::seconds(30));
  const int world = launch.world_size, rank = launch.rank;
  auto sharded = model::CausalLm::init_random(testing::tiny_model_config(), kModelSeed);
  auto everyone = model::CausalLm::init_random(testing::tiny_model_config(), kModelSeed);
  auto local = model::CausalLm::init_random(testing::tiny_model_config(), kModelSeed);
  shard::LayerCollectives collectives(*communicator);
  shard::ShardedLayers layers(*sharded, collectives);

  double loss_error = 0.0;
  for (int m = 0; m < kMicrobatches; ++m) {
    const at::Tensor sharded_loss = loss_of(*sharded, rank, m);
    sharded_loss.backward();
    const at::Tensor local_loss = loss_of(*local, rank, m);
    local_loss.backward();
    loss_error = std::max(loss_error, relative_error(sharded_loss, local_loss));
    for (int r = 0; r < world; ++r) loss_of(*everyone, r, m).backward();
  }
  bool released = true;
  for (size_t i = 0; i < sharded->num_layers(); ++i) {
    for (const at::Tensor& parameter : sharded->layer_parameters(i)) {
      released = released && parameter.numel() == 0 && !parameter.grad().defined();
    }
  }
  double layer_error = 0.0;
  for (size_t i = 0; i < layers.num_layers(); ++i) {
    const at::Tensor expected = gradient_chunk(*everyone, i, rank, layers.layer(i).chunk(), world);
    layer_error = std::max(layer_error, relative_error(layers.layer(i).gradient_shard(), expected));
  }
  double replicated_error = 0.0;
  const auto sharded_named = sharded->named_parameters();
  const auto local_named = local->named_parameters();
  for (size_t k = 0; k < sharded_named.size(); ++k) {
    if (!sharded_named[k].second.grad().defined()) continue;  // a layer's
    replicated_error =
        std::max(replicated_error, relative_error(sharded_named[k].second.grad(), local_named[k].second.grad()));
  }
  at::Tensor eval_logits;
  {
    const at::NoGradGuard no_grad;
    eval_logits = sharded->logits(batch(rank, 0));
  }
  const double eval_error = relative_error(eval_logits, local->logits(batch(rank, 0)).detach());
  layers.detach();
  double detached_error = 0.0;
  for (size_t k = 0; k < sharded_named.size(); ++k) {
    detached_error = std::max(detached_error, relative_error(sharded_named[k].second, local_named[k].second));
  }
  std::cout << "RESULT "
            << nlohmann::json{{"rank", rank},
                              {"released", released},
                              {"loss_error", loss_error},
                              {"layer_error", layer_error},
                              {"replicated_error", replicated_error},
                              {"eval_error", eval_error},
                              {"detached_error", detached_error}}
                   .dump()
            << std::endl;
  return 0;
}

}  // namespace ptrain::dist_test

namespace ptrain::dist_test {

// Rank r gathers layer r: two ranks announcing different layer operations
// must both get an error naming what they ran, not hang or mix the layers.
int run_layer_divergence(const dist::LaunchEnv& launch) {
  auto communicator = dist::make_communicator(launch, std::chrono::seconds(30));
  auto model = model::CausalLm::init_random(testing::tiny_model_config(), kModelSeed);
  shard::LayerCollectives collectives(*communicator);
  shard::ShardedLayers layers(*model, collectives);
  std::string error;
  try {
    layers.gather(static_cast<size_t>(launch.rank) % layers.num_layers());
  } catch (const sdk::Error& caught) {
    error = caught.what();
  }
  std::cout << "RESULT " << nlohmann::json{{"rank", launch.rank}, {"error", error}}.dump() << std::endl;
  return 0;
}

}  // namespace ptrain::dist_test

namespace ptrain::dist_test {

// Rank 0 gathers a layer of model A, then one of model B (the ranks meet
// before B); every other rank gathers A's layer only and then all-reduces
// through the draining communicator, as a rank with fewer microbatches does.
// The drain must go on joining B's gather, not end at rank 0's meeting.
int run_layer_meeting(const dist::LaunchEnv& launch) {
  auto communicator = dist::make_communicator(launch, std::chrono::seconds(30));
  auto model_a = model::CausalLm::init_random(testing::tiny_model_config(), kModelSeed);
  auto model_b = model::CausalLm::init_random(testing::tiny_model_config(), kModelSeed + 1);
  const auto expected_b = model::CausalLm::init_random(testing::tiny_model_config(), kModelSeed + 1);
  shard::LayerCollectives collectives(*communicator);
  dist::DrainingCommunicator draining(*communicator);
  draining.set_before_collective([&collectives] { collectives.drain(); });
  shard::ShardedLayers layers_a(*model_a, collectives, shard::ShardedLayers::Use::kFrozen);
  shard::ShardedLayers layers_b(*model_b, collectives, shard::ShardedLayers::Use::kFrozen);
  nlohmann::json result{{"rank", launch.rank}};
  try {
    layers_a.gather(0);
    layers_a.release(0);
    if (launch.rank == 0) {
      layers_b.gather(1);
      result["b_error"] = testing::relative_error(model_b->layer_tensors(1), expected_b->layer_tensors(1));
      layers_b.release(1);
    }
    std::vector<at::Tensor> sum{at::full({5}, launch.rank + 1.0, at::kDouble)};
    draining.all_reduce_sum(sum);
    result["sum"] = sum[0].sum().item<double>() / 5;
  } catch (const sdk::Error& error) {
    result["error"] = error.what();
  }
  std::cout << "RESULT " << result.dump() << std::endl;
  return 0;
}

}  // namespace ptrain::dist_test
