// DAPO's dynamic sampling with refill (grpo_dynamic_sampling.h) on injected
// rollouts: the step's own batch is the 4 prompts of grpo_test_support.h (one
// of them flat), later global batches come from the table below through
// Context::upcoming_examples. The kept groups, the counts the metrics report,
// the round bound, and the step gradient against the independent full-batch
// reference over the kept groups at micro sizes 1, 2, 4 and 12 (world size
// 2, where the ranks must agree on which groups come first: tests/dist).
#include "catch.h"

#include "grpo_step_fixture.h"

#include "grpo_dynamic_sampling.h"

#include <ATen/ATen.h>

#include <string>
#include <utility>
#include <vector>

using namespace ptrain;
using namespace ptrain::grpo_step;

namespace {

constexpr int64_t kBatch = 4;

// A run on the table whose sampler deals global batch s as prompts 4s … 4s + 3 (one rank).
struct RefillRun {
  RefillRun(bool informative, int64_t rounds)
      : fixture(grpo_test::refill_epoch_prompts(informative), 61),
        values(grpo_test::grpo_values({{"filter_zero_std_groups", true}, {"max_generation_rounds", rounds}})),
        run(fixture, values) {
    fixture.pointers.resize(kBatch);
    run.host.set_example_source([this](int64_t step) {
      std::vector<const sdk::Example*> batch;
      for (int64_t i = 0; i < kBatch; ++i) batch.push_back(&fixture.examples.at(step * kBatch + i));
      return batch;
    });
  }
  Fixture fixture;
  sdk::ConfigValues values;
  Run run;
};

// The reference over `kept` (table indices), flat groups filtered out.
at::Tensor kept_reference(Fixture& f, const std::vector<size_t>& kept, std::vector<at::Tensor>& gradient) {
  std::vector<grpo_test::Prompt> prompts;
  for (const size_t index : kept) prompts.push_back(f.prompts[index]);
  grpo_test::ReferenceSpec spec;
  spec.filter_zero_std = true;
  dpo_test::clear_gradients(f.parameters);
  const at::Tensor loss = grpo_test::reference_step_loss(*f.policy, nullptr, nullptr, prompts, spec);
  loss.backward();
  gradient = dpo_test::gradients_of(f.parameters);
  return loss.detach();
}

int64_t trained_tokens(const Fixture& f, const std::vector<size_t>& informative) {
  std::vector<std::string> texts;
  for (const size_t index : informative) {
    texts.insert(texts.end(), f.prompts[index].completions.begin(), f.prompts[index].completions.end());
  }
  return tokens_of(texts);
}

}  // namespace

TEST_CASE("keep_first_informative keeps informative groups in order up to the target", "[grpo]") {
  int64_t kept = 3;
  CHECK(grpo::keep_first_informative({false, true, true, false}, kept, 4) ==
        std::vector<bool>{false, true, false, false});
  CHECK(kept == 4);
  CHECK(grpo::keep_first_informative({true, true}, kept, 4) == std::vector<bool>{false, false});
  kept = 0;
  CHECK(grpo::keep_first_informative({true, false, true}, kept, 4) == std::vector<bool>{true, false, true});
  CHECK(kept == 2);
}

TEST_CASE("refill: the step takes informative groups from the next batch until it has B of them", "[grpo]") {
  RefillRun refill(true, 3);
  Fixture& f = refill.fixture;
  // Round 0: prompts 0, 2, 3 informative, 1 flat; round 1 (prompts 4-7): 5 is the first informative one,
  // and with it the step has its 4. Prompt 6, also informative, comes after: not kept; round 2 never runs.
  std::vector<at::Tensor> expected;
  const at::Tensor expected_loss = kept_reference(f, {0, 1, 2, 3, 5}, expected);
  check_every_split(f, refill.run, expected_loss, expected, trained_tokens(f, {0, 2, 3, 5}));
  CHECK(refill.run.engine.calls == 2 * 4);  // two rounds a step, four steps

  const std::vector<grpo::ScoredCompletion>& completions = refill.run.module.completions();
  REQUIRE(completions.size() == 5 * 3);
  for (size_t k = 0; k < 3; ++k) {
    CHECK(completions[12 + k].completion_ids == grpo_test::completion_ids(f.prompts[5].completions[k]));
    CHECK(completions[12 + k].trained);
  }
  const dpo_test::StepOutcome outcome =
      dpo_test::run_step(refill.run.module, refill.run.context, f.pointers, {3, 0}, f.parameters, *f.communicator);
  CHECK(outcome.metrics.at("groups/generated") == 8.0);
  CHECK(outcome.metrics.at("groups/kept") == 4.0);
  CHECK(outcome.metrics.at("groups/generation_rounds") == 2.0);
  CHECK(outcome.metrics.at("frac_reward_zero_std") == Approx(1.0 / 5.0));  // prompt 1 of the five groups
}

TEST_CASE("refill stops at max_generation_rounds when later batches stay flat", "[grpo]") {
  for (const int64_t rounds : {1, 2, 3}) {
    DYNAMIC_SECTION("max_generation_rounds " << rounds) {
      RefillRun refill(false, rounds);
      Fixture& f = refill.fixture;
      std::vector<at::Tensor> expected;
      const at::Tensor expected_loss = kept_reference(f, {0, 1, 2, 3}, expected);
      check_every_split(f, refill.run, expected_loss, expected, trained_tokens(f, {0, 2, 3}));
      CHECK(refill.run.engine.calls == rounds * 4);
      CHECK(refill.run.module.completions().size() == 12);  // no flat group of a refill round is kept
      const dpo_test::StepOutcome outcome =
          dpo_test::run_step(refill.run.module, refill.run.context, f.pointers, {12, 0}, f.parameters, *f.communicator);
      CHECK(outcome.metrics.at("groups/generated") == static_cast<double>(kBatch * rounds));
      CHECK(outcome.metrics.at("groups/kept") == 3.0);
      CHECK(outcome.metrics.at("groups/generation_rounds") == static_cast<double>(rounds));
    }
  }
}

TEST_CASE("a refill round samples new completions: generation indices r·G + k", "[grpo]") {
  // The engine records what it is asked for; the table answers index % G.
  RefillRun refill(false, 2);
  Fixture& f = refill.fixture;
  struct Recording final : sdk::RolloutEngine {
    explicit Recording(sdk::RolloutEngine& inner) : inner(inner) {}
    std::vector<sdk::Rollout> generate(const std::vector<sdk::RolloutRequest>& requests,
                                       const sdk::SamplingParams& sampling, int64_t batch) override {
      for (const sdk::RolloutRequest& request : requests)
        asked.emplace_back(request.prompt_index, request.generation_index);
      return inner.generate(requests, sampling, batch);
    }
    sdk::RolloutEngine& inner;
    std::vector<std::pair<int64_t, int64_t>> asked;
  } recording(refill.run.engine);
  grpo_test::InjectedContext context(refill.run.host, recording);
  refill.run.module.prepare(context, f.pointers, {4, 0});
  REQUIRE(recording.asked.size() == 24);
  for (size_t i = 0; i < 24; ++i) {
    INFO("request " << i);
    CHECK(recording.asked[i].first == static_cast<int64_t>(i / 3));  // prompts 0-3, then 4-7
    CHECK(recording.asked[i].second == static_cast<int64_t>((i / 12) * 3 + i % 3));
  }
}
