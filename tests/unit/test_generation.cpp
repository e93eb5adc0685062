// The rollout engine (core/generation): KV-cache greedy decoding against an
// independent greedy decoder that recomputes each unpadded sequence through
// CausalLm::logits; rollouts that do not depend on how requests are batched;
// the sampling filters against their closed forms on hand-made logits; stop
// conditions.
#include "catch.h"

#include "support/test_util.h"

#include "core/generation/rollout_engine.h"
#include "core/generation/sampling.h"
#include "core/model/causal_lm.h"
#include "core/tokenizer/byte_tokenizer.h"
#include "ptrain/sdk/errors.h"
#include "scalar_reads.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace {

using namespace ptrain;

std::vector<int64_t> prompt_ids(const std::string& text) {
  std::vector<int64_t> ids{tokenizer::ByteTokenizer::kBos};
  for (const unsigned char byte : text) ids.push_back(byte);
  return ids;
}

std::vector<sdk::RolloutRequest> requests_for(const std::vector<std::string>& prompts, int64_t generations) {
  std::vector<sdk::RolloutRequest> requests;
  for (size_t p = 0; p < prompts.size(); ++p) {
    for (int64_t g = 0; g < generations; ++g) requests.push_back({prompt_ids(prompts[p]), static_cast<int64_t>(p), g});
  }
  return requests;
}

// Greedy decoding of one sequence alone: the whole sequence through the
// training forward every token, argmax of the last position.
std::vector<int64_t> reference_greedy(model::CausalLm& model, std::vector<int64_t> tokens, int64_t new_tokens) {
  const at::NoGradGuard no_grad;
  std::vector<int64_t> completion;
  for (int64_t i = 0; i < new_tokens; ++i) {
    const at::Tensor logits = model.logits(at::tensor(tokens, at::kLong).unsqueeze(0));  // [1, T, V]
    const int64_t next = logits[0][-1].argmax().item<int64_t>();
    tokens.push_back(next);
    completion.push_back(next);
  }
  return completion;
}

// The byte tokenizer with another id as <eos>.
class EosAs final : public sdk::Tokenizer {
 public:
  explicit EosAs(int64_t eos) : eos_(eos) {}
  std::vector<int64_t> encode(std::string_view text) const override { return bytes_.encode(text); }
  std::string decode(const std::vector<int64_t>& ids) const override { return bytes_.decode(ids); }
  int64_t bos_id() const override { return bytes_.bos_id(); }
  int64_t eos_id() const override { return eos_; }
  int64_t pad_id() const override { return bytes_.pad_id(); }
  int64_t vocab_size() const override { return bytes_.vocab_size(); }
  std::string fingerprint() const override { return "eos-as"; }

 private:
  tokenizer::ByteTokenizer bytes_;
  int64_t eos_;
};

const std::vector<std::string> kPrompts{"1+1=", "a longer prompt here=", "q", "93-27=", "héllo"};

// Greedy decoding of exactly `new_tokens` tokens (<eos> does not stop it).
sdk::SamplingParams greedy_without_eos(int64_t new_tokens) {
  sdk::SamplingParams params;
  params.temperature = 0.0;
  params.max_new_tokens = new_tokens;
  params.stop_at_eos = false;
  return params;
}

}  // namespace

TEST_CASE("greedy decoding with the KV cache equals greedy recomputation of each sequence alone", "[generation]") {
  const auto model = model::CausalLm::init_random(testing::tiny_model_config(), 3);
  const tokenizer::ByteTokenizer tokenizer;
  generation::CausalLmRolloutEngine engine(*model, tokenizer);
  sdk::SamplingParams params = greedy_without_eos(12);
  const std::vector<sdk::RolloutRequest> requests = requests_for(kPrompts, 1);
  for (const bool use_cache : {true, false}) {
    params.use_kv_cache = use_cache;
    const std::vector<sdk::Rollout> rollouts = engine.generate(requests, params);
    REQUIRE(rollouts.size() == requests.size());
    for (size_t i = 0; i < requests.size(); ++i) {
      INFO("prompt " << kPrompts[i] << ", kv cache " << use_cache);
      CHECK(rollouts[i].completion_ids == reference_greedy(*model, requests[i].prompt_ids, 12));
      CHECK(rollouts[i].stop_reason == sdk::StopReason::kLength);
    }
  }
}

TEST_CASE("rollouts do not depend on the batch they are generated in", "[generation]") {
  const auto model = model::CausalLm::init_random(testing::tiny_model_config(), 4);
  const tokenizer::ByteTokenizer tokenizer;
  generation::CausalLmRolloutEngine engine(*model, tokenizer);
  for (const double temperature : {0.0, 1.0}) {
    DYNAMIC_SECTION("temperature " << temperature) {
      sdk::SamplingParams params;
      params.temperature = temperature;
      params.top_p = 0.95;
      params.max_new_tokens = 10;
      params.seed = 11;
      params.step = 2;
      const std::vector<sdk::RolloutRequest> all = requests_for(kPrompts, 3);
      const std::vector<sdk::Rollout> together = engine.generate(all, params);
      std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> by_key;
      for (size_t i = 0; i < all.size(); ++i)
        by_key[{all[i].prompt_index, all[i].generation_index}] = together[i].completion_ids;

      for (const int64_t max_batch : {1, 2, 4}) {
        const std::vector<sdk::Rollout> split = engine.generate(all, params, max_batch);
        for (size_t i = 0; i < all.size(); ++i) CHECK(split[i].completion_ids == together[i].completion_ids);
      }
      // A different subset in reverse order, as another rank or microbatch would hold it.
      std::vector<sdk::RolloutRequest> subset(all.rbegin(), all.rbegin() + 5);
      const std::vector<sdk::Rollout> alone = engine.generate(subset, params);
      for (size_t i = 0; i < subset.size(); ++i) {
        CHECK(alone[i].completion_ids == by_key.at({subset[i].prompt_index, subset[i].generation_index}));
      }
      if (temperature > 0) {
        // The G completions of a prompt differ: each sequence has its own generator.
        CHECK(together[0].completion_ids != together[1].completion_ids);
        params.seed = 12;
        CHECK(engine.generate(all, params)[0].completion_ids != together[0].completion_ids);
      }
    }
  }
}

TEST_CASE("the sampling filters keep what their closed forms say", "[generation]") {
  // p = (0.5, 0.25, 0.15, 0.1) at temperature 1.
  const at::Tensor logits = at::log(at::tensor({0.5, 0.25, 0.15, 0.1}, at::kDouble)).to(at::kFloat);
  auto distribution = [&](auto configure) {
    sdk::SamplingParams params;
    configure(params);
    return generation::sampling_distribution(logits, params);
  };
  auto expect = [](const at::Tensor& actual, std::vector<double> expected) {
    INFO("actual " << actual);
    REQUIRE(actual.size(0) == static_cast<int64_t>(expected.size()));
    for (size_t i = 0; i < expected.size(); ++i) CHECK(actual[i].item<double>() == Approx(expected[i]).margin(1e-6));
  };
  expect(distribution([](sdk::SamplingParams&) {}), {0.5, 0.25, 0.15, 0.1});
  expect(distribution([](sdk::SamplingParams& p) { p.top_k = 2; }), {2.0 / 3, 1.0 / 3, 0, 0});
  // top-p 0.7: the masses before each token are 0, 0.5, 0.75 → two tokens; 0.8 → three.
  expect(distribution([](sdk::SamplingParams& p) { p.top_p = 0.7; }), {2.0 / 3, 1.0 / 3, 0, 0});
  expect(distribution([](sdk::SamplingParams& p) { p.top_p = 0.8; }), {0.5 / 0.9, 0.25 / 0.9, 0.15 / 0.9, 0});
  // min-p 0.25: p ≥ 0.125 stays.
  expect(distribution([](sdk::SamplingParams& p) { p.min_p = 0.25; }), {0.5 / 0.9, 0.25 / 0.9, 0.15 / 0.9, 0});
  // temperature 2: p ∝ √p.
  const double root_sum = std::sqrt(0.5) + std::sqrt(0.25) + std::sqrt(0.15) + std::sqrt(0.1);
  expect(distribution([](sdk::SamplingParams& p) { p.temperature = 2.0; }),
         {std::sqrt(0.5) / root_sum, 0.5 / root_sum, std::sqrt(0.15) / root_sum, std::sqrt(0.1) / root_sum});
  // top-k then top-p on what top-k kept: k = 3 leaves (0.5, 0.25, 0.15)/0.9; top-p 0.6 keeps two.
  expect(distribution([](sdk::SamplingParams& p) {
           p.top_k = 3;
           p.top_p = 0.6;
         }),
         {2.0 / 3, 1.0 / 3, 0, 0});

  // Repetition penalty θ = 2 on ids {0, 1}: positive logits halve, negative ones double.
  const at::Tensor raw = at::tensor({2.0f, -1.0f, 0.5f}).unsqueeze(0);
  const std::vector<int64_t> context{0, 1, 0};
  const at::Tensor seen = generation::context_mask({&context}, 3, raw.options());
  CHECK(at::equal(seen, at::tensor({1, 1, 0}, at::kLong).to(at::kBool).unsqueeze(0)));
  CHECK(at::equal(generation::penalize_repetitions(raw, seen, 2.0), at::tensor({1.0f, -2.0f, 0.5f}).unsqueeze(0)));
  sdk::SamplingParams greedy;
  greedy.temperature = 0.0;
  greedy.repetition_penalty = 2.0;
  const at::Tensor close = at::tensor({1.0f, 0.9f}).unsqueeze(0);
  const std::vector<int64_t> first{0};
  const at::Tensor first_seen = generation::context_mask({&first}, 2, close.options());
  const at::Tensor no_draw = at::zeros({1}, at::kDouble);
  CHECK(generation::choose_next_tokens(close, first_seen, greedy, no_draw).item<int64_t>() == 1);
  greedy.repetition_penalty = 1.0;
  CHECK(generation::choose_next_tokens(close, first_seen, greedy, no_draw).item<int64_t>() == 0);

  // Draws follow the filtered distribution: top-p 0.8, 20000 rows drawn at once.
  sdk::SamplingParams sampled;
  sampled.top_p = 0.8;
  at::Generator generator = at::detail::createCPUGenerator(0);
  const at::Tensor uniforms = at::empty({20000}, at::kDouble).uniform_(0.0, 1.0, generator);
  const at::Tensor drawn =
      generation::choose_next_tokens(logits.unsqueeze(0).expand({20000, 4}), {}, sampled, uniforms);
  const at::Tensor counts = at::bincount(drawn, {}, 4).to(at::kDouble) / 20000;
  CHECK(counts[0].item<double>() == Approx(0.5 / 0.9).margin(0.015));
  CHECK(counts[1].item<double>() == Approx(0.25 / 0.9).margin(0.015));
  CHECK(counts[2].item<double>() == Approx(0.15 / 0.9).margin(0.015));
  CHECK(counts[3].item<double>() == 0.0);
  // The inverse CDF at chosen points: cdf = (0.5, 0.75, 0.9, 0.9)/0.9, so u = 0.5 falls in the first token's
  // mass and u = 0.99 in the third's; u = 1, at or past every kept token's cdf, lands on the last kept token,
  // never on the filtered fourth.
  const at::Tensor at_points = generation::choose_next_tokens(logits.unsqueeze(0).expand({3, 4}), {}, sampled,
                                                              at::tensor({0.5, 0.99, 1.0}, at::kDouble));
  CHECK(at::equal(at_points, at::tensor({0, 2, 2}, at::kLong)));
}

TEST_CASE("batched sampling gives each row what it gives the row alone", "[generation]") {
  // Rows of different logits, contexts and draws: no row's choice depends on another.
  at::manual_seed(4);
  const at::Tensor logits = at::randn({6, 50}) * 3;
  std::vector<std::vector<int64_t>> contexts{{1, 2}, {}, {49}, {3, 3, 7}, {0}, {10, 20, 30}};
  std::vector<const std::vector<int64_t>*> pointers;
  for (const auto& context : contexts) pointers.push_back(&context);
  const at::Tensor uniforms = at::rand({6}, at::kDouble);
  sdk::SamplingParams params;
  params.temperature = 0.8;
  params.top_k = 20;
  params.top_p = 0.9;
  params.min_p = 0.02;
  params.repetition_penalty = 1.3;
  for (const double temperature : {0.0, 0.8}) {
    params.temperature = temperature;
    const at::Tensor seen = generation::context_mask(pointers, 50, logits.options());
    const at::Tensor together = generation::choose_next_tokens(logits, seen, params, uniforms);
    for (int64_t i = 0; i < 6; ++i) {
      INFO("temperature " << temperature << ", row " << i);
      const at::Tensor alone = generation::choose_next_tokens(
          logits.narrow(0, i, 1), generation::context_mask({pointers[i]}, 50, logits.options()), params,
          uniforms.narrow(0, i, 1));
      CHECK(together[i].item<int64_t>() == alone.item<int64_t>());
    }
  }
}

TEST_CASE("generation stops at <eos>, at a stop string, or at its token limit", "[generation]") {
  const auto model = model::CausalLm::init_random(testing::tiny_model_config(), 5);
  const tokenizer::ByteTokenizer tokenizer;
  generation::CausalLmRolloutEngine engine(*model, tokenizer);
  sdk::SamplingParams params = greedy_without_eos(8);
  std::vector<sdk::RolloutRequest> requests = requests_for({"1+1=", "q"}, 1);
  requests[1].max_new_tokens = 3;
  const std::vector<sdk::Rollout> free_run = engine.generate(requests, params);
  CHECK(free_run[0].completion_ids.size() == 8);
  CHECK(free_run[1].completion_ids.size() == 3);

  // A stop string taken from the free run's text ends the completion where it first appears (kept).
  const std::vector<int64_t>& ids = free_run[0].completion_ids;
  const std::string text = tokenizer.decode(ids);
  REQUIRE(text.size() >= 4);
  const std::string stop = text.substr(2, 2);
  params.stop_strings = {stop};
  const sdk::Rollout stopped = engine.generate({requests[0]}, params)[0];
  CHECK(stopped.stop_reason == sdk::StopReason::kStopString);
  const size_t end = text.find(stop) + stop.size();
  CHECK(tokenizer.decode(stopped.completion_ids) == text.substr(0, end));

  // With the free run's fourth token as <eos>, generation stops right after it, <eos> included.
  EosAs eos_as_fourth(ids[3]);
  generation::CausalLmRolloutEngine eos_engine(*model, eos_as_fourth);
  params.stop_strings.clear();
  params.stop_at_eos = true;
  const sdk::Rollout ended = eos_engine.generate({requests[0]}, params)[0];
  CHECK(ended.stop_reason == sdk::StopReason::kEos);
  const auto first_eos = std::find(ids.begin(), ids.end(), ids[3]);
  CHECK(ended.completion_ids == std::vector<int64_t>(ids.begin(), first_eos + 1));

  // A prompt that leaves no position to generate into is a usage error.
  sdk::RolloutRequest too_long{std::vector<int64_t>(64, 'a'), 0, 0};
  CHECK_THROWS_AS(engine.generate({too_long}, params), sdk::UsageError);
}

TEST_CASE("decoding reads back once per step, however many rows it samples", "[generation]") {
  // On a GPU a read waits for the queued kernels: one per row per token would
  // serialise the decoder. The count must not grow with the batch.
  const auto model = model::CausalLm::init_random(testing::tiny_model_config(), 5);
  const tokenizer::ByteTokenizer tokenizer;
  generation::CausalLmRolloutEngine engine(*model, tokenizer);
  sdk::SamplingParams params;
  params.max_new_tokens = 6;
  params.stop_at_eos = false;
  params.temperature = 0.9;
  params.top_p = 0.9;
  params.repetition_penalty = 1.2;
  auto reads_for = [&](int64_t generations) {
    testing::ScalarReadCounter counter;
    counter.start();
    const std::vector<sdk::Rollout> rollouts = engine.generate(requests_for({"12+34="}, generations), params);
    counter.stop();
    for (const sdk::Rollout& rollout : rollouts) REQUIRE(rollout.completion_ids.size() == 6);
    return counter.reads();
  };
  const int64_t one_row = reads_for(1);
  INFO("reads with 1 row: " << one_row);
  CHECK(reads_for(8) == one_row);
  CHECK(one_row <= 2 * 7);  // the decoder's host-side position checks, at most two per step
}
