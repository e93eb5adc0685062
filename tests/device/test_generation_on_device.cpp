// Rollouts of a model on the stand-in device (docs/devices.md): the KV cache
// decodes as recomputation does, and with every sampling filter a row gets
// the same tokens in any batch and on the device as on the CPU (the draws are
// the host's; only the logits are computed elsewhere).
#include "catch.h"

#include "device_test_support.h"
#include "support/test_util.h"

#include "core/generation/rollout_engine.h"
#include "core/model/causal_lm.h"
#include "core/tokenizer/byte_tokenizer.h"

#include <ATen/ATen.h>

#include <string>
#include <vector>

namespace {

using namespace ptrain;

std::vector<sdk::RolloutRequest> requests_for(const std::vector<std::string>& prompts, int64_t generations) {
  std::vector<sdk::RolloutRequest> requests;
  for (size_t p = 0; p < prompts.size(); ++p) {
    std::vector<int64_t> ids{tokenizer::ByteTokenizer::kBos};
    for (const unsigned char byte : prompts[p]) ids.push_back(byte);
    for (int64_t g = 0; g < generations; ++g) requests.push_back({ids, static_cast<int64_t>(p), g});
  }
  return requests;
}

std::vector<std::vector<int64_t>> completions(const std::vector<sdk::Rollout>& rollouts) {
  std::vector<std::vector<int64_t>> ids;
  for (const sdk::Rollout& rollout : rollouts) ids.push_back(rollout.completion_ids);
  return ids;
}

const std::vector<std::string> kPrompts{"1+1=", "a longer prompt here=", "q", "93-27="};

}  // namespace

TEST_CASE("rollouts on the device: the KV cache, every sampling filter, any batch, the CPU's tokens",
          "[device][generation]") {
  const at::Device device = testing::stand_in();
  const auto on_cpu = model::CausalLm::init_random(testing::tiny_model_config(), 3);
  const auto on_device = model::CausalLm::init_random(testing::tiny_model_config(), 3);
  on_device->to_device(device);
  const tokenizer::ByteTokenizer tokenizer;
  generation::CausalLmRolloutEngine cpu_engine(*on_cpu, tokenizer);
  generation::CausalLmRolloutEngine device_engine(*on_device, tokenizer);
  const std::vector<sdk::RolloutRequest> requests = requests_for(kPrompts, 2);

  struct Filters {
    std::string name;
    double temperature, top_p, min_p, repetition_penalty;
    int64_t top_k;
  };
  for (const Filters& filters :
       {Filters{"greedy", 0.0, 1.0, 0.0, 1.0, 0}, Filters{"temperature", 0.7, 1.0, 0.0, 1.0, 0},
        Filters{"top_k", 1.0, 1.0, 0.0, 1.0, 12}, Filters{"top_p", 1.0, 0.8, 0.0, 1.0, 0},
        Filters{"min_p", 1.0, 1.0, 0.05, 1.0, 0}, Filters{"repetition_penalty", 1.0, 1.0, 0.0, 1.3, 0},
        Filters{"all together", 0.8, 0.9, 0.02, 1.2, 20}}) {
    DYNAMIC_SECTION(filters.name) {
      sdk::SamplingParams params;
      params.temperature = filters.temperature;
      params.top_p = filters.top_p;
      params.min_p = filters.min_p;
      params.repetition_penalty = filters.repetition_penalty;
      params.top_k = filters.top_k;
      params.max_new_tokens = 10;
      params.stop_at_eos = false;
      params.seed = 7;
      const auto cached = completions(device_engine.generate(requests, params));
      params.use_kv_cache = false;
      CHECK(completions(device_engine.generate(requests, params)) == cached);
      params.use_kv_cache = true;
      CHECK(completions(device_engine.generate(requests, params, 3)) == cached);
      CHECK(completions(cpu_engine.generate(requests, params)) == cached);
    }
  }
}
