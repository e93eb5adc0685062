// distributed.sharding = "optimizer" or "full" with more ranks than the
// trainable parameters (or a decoder layer) can be split over is a
// ConfigError naming the key and the config file, raised while the run is
// built, before any collective.
#include "catch.h"

#include "bad_inputs/rejection.h"

#include "core/config/run_config.h"
#include "core/dist/communicator.h"
#include "core/dist/gradient_sync.h"
#include "core/model/causal_lm.h"
#include "core/shard/layer_collectives.h"
#include "core/shard/sharded_layers.h"
#include "core/train/weight_update.h"

#include <ATen/ATen.h>

#include <stdexcept>

using namespace ptrain;

namespace {

// A world of `world_size` ranks whose collectives must not be reached.
class UnreachedCommunicator final : public dist::Communicator {
 public:
  explicit UnreachedCommunicator(int world_size) : world_size_(world_size) {}
  int rank() const override { return 0; }
  int world_size() const override { return world_size_; }
  int local_rank() const override { return 0; }
  int local_world_size() const override { return world_size_; }
  void all_reduce_sum(std::vector<at::Tensor>&) override { unreached(); }
  void all_reduce_max(std::vector<at::Tensor>&) override { unreached(); }
  void broadcast(std::vector<at::Tensor>&, int) override { unreached(); }
  void barrier() override { unreached(); }
  std::unique_ptr<dist::PendingCollective> all_reduce_sum_async(std::vector<at::Tensor>&) override { unreached(); }
  std::unique_ptr<dist::PendingCollective> reduce_scatter_sum_async(at::Tensor&, at::Tensor&) override { unreached(); }
  std::unique_ptr<dist::PendingCollective> all_gather_async(at::Tensor&, at::Tensor&) override { unreached(); }
  double collective_seconds() const override { return 0.0; }

 private:
  [[noreturn]] static void unreached() { throw std::logic_error("a collective ran while the run was being checked"); }
  int world_size_;
};

}  // namespace

TEST_CASE("optimizer sharding over more ranks than trainable elements allow is a config error",
          "[bad_inputs][sharding]") {
  config::RunConfig config;
  config.source = "shard.toml";
  config.distributed.sharding = config::ShardingMode::kOptimizer;
  // 4 trainable elements in one bucket: chunks of 1 for 4 ranks, of 2 for 3 (the last rank owns padding only).
  const std::vector<std::pair<std::string, at::Tensor>> named{{"scale", at::zeros({3}, at::kFloat)},
                                                              {"bias", at::zeros({1}, at::kFloat)}};
  const std::vector<at::Tensor> parameters{named[0].second, named[1].second};
  for (const int world_size : {3, 5}) {
    INFO("world size " << world_size);
    UnreachedCommunicator communicator(world_size);
    dist::GradientSynchronizer grad_sync(parameters, communicator, 1 << 20, /*sharded=*/true);
    testing::check_rejected([&] { train::make_weight_update(config, named, grad_sync, communicator); }, "ConfigError",
                            "shard.toml: distributed.sharding = \"optimizer\"");
  }
  UnreachedCommunicator four(4);
  dist::GradientSynchronizer grad_sync(parameters, four, 1 << 20, /*sharded=*/true);
  const testing::Rejection accepted =
      testing::rejection_of([&] { train::make_weight_update(config, named, grad_sync, four); });
  CHECK(accepted.kind == "accepted");
}

TEST_CASE("full sharding over more ranks than a decoder layer's elements allow is a config error",
          "[bad_inputs][sharding]") {
  config::RunConfig config;
  config.source = "shard.toml";
  config.distributed.sharding = config::ShardingMode::kFull;
  // One layer of 32 elements (hidden 2): 9 ranks get chunks of 4, and the last one's starts at 32.
  model::ModelConfig sizes;
  sizes.vocab_size = 8;
  sizes.hidden_size = 2;
  sizes.intermediate_size = 2;
  sizes.num_layers = 1;
  sizes.num_heads = 1;
  sizes.num_kv_heads = 1;
  sizes.max_position_embeddings = 8;
  for (const int world_size : {9, 2}) {
    INFO("world size " << world_size);
    auto model = model::CausalLm::init_random(sizes, 1);
    const auto named = model->named_parameters();
    UnreachedCommunicator communicator(world_size);
    shard::LayerCollectives collectives(communicator);
    shard::ShardedLayers layers(*model, collectives);
    std::vector<at::Tensor> replicated;  // outside the layer: the embeddings, the final norm, lm_head
    for (const auto& [name, parameter] : named) {
      if (name.find(".layers.") == std::string::npos) replicated.push_back(parameter);
    }
    dist::GradientSynchronizer grad_sync(replicated, communicator, 1 << 20, /*sharded=*/true);
    const auto update = [&] { train::make_weight_update(config, named, grad_sync, communicator, &layers); };
    if (world_size == 9) {
      testing::check_rejected(update, "ConfigError",
                              "shard.toml: distributed.sharding = \"full\" splits every decoder layer into equal "
                              "chunks, one for each of the 9 ranks, but layer 0 holds only 32 elements");
    } else {
      CHECK(testing::rejection_of(update).kind == "accepted");
    }
  }
}
