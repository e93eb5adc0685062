// The order in which a model asks its LayerParameterSource (sharding "full")
// for layers: each gather is followed by the prefetch of the layer computed
// next (ascending in forwards, descending in backward), so that layer's
// gather travels while this one computes; the last layer of a pass
// prefetches nothing.
#include "catch.h"

#include "core/model/causal_lm.h"
#include "core/model/model_transforms.h"
#include "support/test_util.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <string>
#include <vector>

namespace {

using ptrain::model::CausalLm;

// Leaves the tensors whole (nothing is sharded) and records every call.
class RecordingSource final : public CausalLm::LayerParameterSource {
 public:
  void gather(size_t layer) override { calls.push_back("gather " + std::to_string(layer)); }
  void release(size_t layer) override { calls.push_back("release " + std::to_string(layer)); }
  void add_gradients(size_t layer, const std::vector<at::Tensor>&) override {
    calls.push_back("gradients " + std::to_string(layer));
  }
  void blend_from(LayerParameterSource&, double) override { calls.push_back("blend"); }
  void prefetch(size_t layer) override { calls.push_back("prefetch " + std::to_string(layer)); }

  std::vector<std::string> calls;
};

const std::vector<std::string> kForward{"gather 0", "prefetch 1", "release 0", "gather 1",
                                        "prefetch 2", "release 1", "gather 2",  "release 2"};

}  // namespace

TEST_CASE("a sharded model prefetches the next layer in forwards and the previous one in backward", "[model][shards]") {
  ptrain::model::ModelConfig config = ptrain::testing::tiny_model_config();
  config.num_layers = 3;
  auto model = CausalLm::init_random(config, 1);
  RecordingSource source;
  ptrain::model::shard_layers(*model, source);
  const at::Tensor ids = at::arange(6, at::kLong).view({1, 6});

  SECTION("training: forward, then backward recomputing each layer") {
    const at::Tensor loss = model->logits(ids).sum();
    CHECK(source.calls == kForward);
    source.calls.clear();
    loss.backward();
    CHECK(source.calls == std::vector<std::string>{"gather 2", "prefetch 1", "gradients 2", "release 2",
                                                   "gather 1", "prefetch 0", "gradients 1", "release 1",
                                                   "gather 0", "gradients 0", "release 0"});
  }
  SECTION("a forward without autograd") {
    const at::NoGradGuard no_grad;
    model->logits(ids);
    CHECK(source.calls == kForward);
  }
  SECTION("a KV-cache decoding step") {
    const at::NoGradGuard no_grad;
    CausalLm::KvCache cache = model->new_kv_cache(1, 8);
    model->decode_step(ids, at::arange(6, at::kLong).view({1, 6}), at::ones({1, 6}, at::kBool), cache);
    CHECK(source.calls == kForward);
  }
  ptrain::model::unshard_layers(*model);
}
