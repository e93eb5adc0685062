#include "worker_layer_shards.h"

#include "core/dist/c10d_communicator.h"
#include "core/train/sharded_layers.h"
#include "support/test_util.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <iostream>
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

// This rank's chunk of layer `layer`'s gradients, concatenated and zero-padded.
at::Tensor gradient_chunk(const model::CausalLm& model, size_t layer, int rank, int64_t chunk, int world) {
  std::vector<at::Tensor> flat;
  for (const at::Tensor& parameter : model.layer_parameters(layer)) flat.push_back(parameter.grad().reshape({-1}));
  at::Tensor all = at::cat(flat);
  all = at::cat({all, at::zeros({chunk * world - all.numel()}, all.options())});
  return all.narrow(0, rank * chunk, chunk);
}

double relative_error(const at::Tensor& got, const at::Tensor& expected) {
  return (got - expected).abs().max().item<double>() / expected.abs().max().item<double>();
}

}  // namespace

// Sharded model: this rank's microbatches. References, unsharded: `everyone`
// runs every rank's microbatches (the summed layer gradients), `local` this
// rank's only (its replicated tensors' gradients and its losses).
int run_sharded_layers(const dist::LaunchEnv& launch) {
  auto communicator = dist::make_communicator(launch, std::chrono::seconds(30));
  const int world = launch.world_size, rank = launch.rank;
  auto sharded = model::CausalLm::init_random(testing::tiny_model_config(), kModelSeed);
  auto everyone = model::CausalLm::init_random(testing::tiny_model_config(), kModelSeed);
  auto local = model::CausalLm::init_random(testing::tiny_model_config(), kModelSeed);
  train::ShardedLayers layers(*sharded, *communicator);

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
