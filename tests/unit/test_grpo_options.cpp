// GRPO options beyond the core objective, each on injected rollouts against
// the independent full-batch reference of grpo_test_support.h (rewards
// written out by hand, advantages, entropies and quantiles recomputed from
// their formulas): filter_zero_std_groups (exactly flat groups and groups
// flat only up to float rounding add no units), top_entropy_quantile (which
// tokens are kept), reward_aggregation = normalize_then_sum (TRL's
// formula, by hand on 2 prompts × G = 4 and over every split), and GSPO's
// sequence-level ratio on the second update of num_iterations = 2, where it
// differs from the token-level one. Each gradient check runs micro sizes 1,
// 2, 4 and the whole batch; world size 2: tests/dist.
#include "catch.h"

#include "grpo_step_fixture.h"

#include "grpo_advantages.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

using namespace ptrain;
using namespace ptrain::grpo_step;

TEST_CASE("a zero-variance test is isclose(std, 0), not std == 0", "[grpo]") {
  // 0.7 + 0.1 and 0.8 are the same reward on paper; in doubles they differ in the last bit.
  const at::Tensor rewards = at::tensor({0.7 + 0.1, 0.8, 0.7 + 0.1, 1.0, 1.0, 1.0, 0.0, 1.0, 0.0}, at::kDouble);
  const at::Tensor stds = grpo::group_std(rewards.view({3, 3}));
  REQUIRE(stds[0].item<double>() > 0.0);  // exact comparison with 0 would miss it
  CHECK(grpo::is_zero_std(stds[0].item<double>()));
  CHECK(grpo::is_zero_std(stds[1].item<double>()));
  CHECK_FALSE(grpo::is_zero_std(stds[2].item<double>()));
  CHECK_FALSE(grpo::is_zero_std(1e-6));  // a real, if small, spread is kept
}

TEST_CASE("filter_zero_std_groups: flat groups, also flat only up to rounding, add no units", "[grpo]") {
  // Rewards closeness + 0.1·format with format_pattern ^[0-9]+$ (so "-2" is a number but not well formed):
  //   "1+1=" → 2:   "2" 1 + 0.1, "3" 0.9 + 0.1, "22" 0 + 0.1   mixed
  //   "3-3=" → 0:   "3" 0.7 + 0.1, "-2" 0.8 + 0, "3" 0.7 + 0.1  flat on paper, std ≈ 6e-17 in doubles
  //   "2+3=" → 5:   "5" three times, 1 + 0.1                   exactly flat
  //   "4+5=" → 9:   "7" 0.8 + 0.1, "x" 0 + 0, "9" 1 + 0.1       mixed
  const std::vector<grpo_test::Prompt> prompts{{"1+1=", "2", {"2", "3", "22"}},
                                               {"3-3=", "0", {"3", "-2", "3"}},
                                               {"2+3=", "5", {"5", "5", "5"}},
                                               {"4+5=", "9", {"7", "x", "9"}}};
  grpo_test::ReferenceSpec spec;
  spec.function_rewards = {{{1.0, 0.9, 0.0}, {0.7, 0.8, 0.7}, {1.0, 1.0, 1.0}, {0.8, 0.0, 1.0}},
                           {{1.0, 1.0, 1.0}, {1.0, 0.0, 1.0}, {1.0, 1.0, 1.0}, {1.0, 0.0, 1.0}}};
  spec.reward_weights = {1.0, 0.1};
  const std::map<std::string, sdk::ConfigValue> rewards{
      {"reward_funcs", std::vector<std::string>{"closeness", "format"}},
      {"reward_weights", std::vector<double>{1.0, 0.1}},
      {"format_pattern", std::string("^[0-9]+$")}};

  for (const bool filter : {false, true}) {
    DYNAMIC_SECTION("filter_zero_std_groups " << filter) {
      Fixture f(prompts);
      auto overrides = rewards;
      overrides["filter_zero_std_groups"] = filter;
      const sdk::ConfigValues values = grpo_test::grpo_values(overrides);
      Run run(f, values);
      spec.filter_zero_std = filter;
      std::vector<at::Tensor> expected;
      const at::Tensor expected_loss = expected_gradient(f, spec, expected);
      // Units (tokens, loss_type dapo): all twelve completions, or only the mixed groups'.
      const int64_t all_units = tokens_of({"2", "3", "22", "3", "-2", "3", "5", "5", "5", "7", "x", "9"});
      const int64_t mixed_units = tokens_of({"2", "3", "22", "7", "x", "9"});
      check_every_split(f, run, expected_loss, expected, filter ? mixed_units : all_units);

      const std::vector<grpo::ScoredCompletion>& completions = run.module.completions();
      REQUIRE(completions.size() == 12);
      CHECK(completions[3].group_std > 0.0);  // the rounding-flat group is not exactly flat
      for (size_t i = 0; i < completions.size(); ++i) {
        const bool flat_group = i / 3 == 1 || i / 3 == 2;
        INFO("completion " << i);
        CHECK(completions[i].trained == !(filter && flat_group));
      }
      const dpo_test::StepOutcome outcome =
          dpo_test::run_step(run.module, run.context, f.pointers, {5, 0}, f.parameters, *f.communicator);
      CHECK(outcome.metrics.at("frac_reward_zero_std") == Approx(0.5));  // both flat groups, either way
    }
  }

  SECTION("a batch of flat groups only has no unit: the step is skipped, not NaN") {
    Fixture f({{"2+3=", "5", {"5", "5", "5"}}, {"3-3=", "0", {"3", "-2", "3"}}});
    auto overrides = rewards;
    overrides["filter_zero_std_groups"] = true;
    const sdk::ConfigValues values = grpo_test::grpo_values(overrides);
    Run run(f, values);
    const dpo_test::StepOutcome outcome =
        dpo_test::run_step(run.module, run.context, f.pointers, {2, 0}, f.parameters, *f.communicator);
    CHECK_FALSE(outcome.gradient.has_units);
    CHECK(outcome.gradient.global_units[0] == 0);
  }
}

TEST_CASE("top_entropy_quantile keeps the tokens at or above the batch's entropy quantile", "[grpo]") {
  Fixture f(grpo_test::global_batch_prompts(), 43);
  grpo_test::sharpen_lm_head(*f.policy, 40.0);
  // 37 completion tokens; ρ·36 is not an integer, so the threshold falls between two entropies.
  for (const double rho : {0.55, 0.2}) {
    DYNAMIC_SECTION("rho " << rho) {
      const sdk::ConfigValues values = grpo_test::grpo_values({{"top_entropy_quantile", rho}});
      Run run(f, values);
      grpo_test::ReferenceSpec spec;
      spec.top_entropy_quantile = rho;
      std::vector<at::Tensor> expected;
      const at::Tensor expected_loss = expected_gradient(f, spec, expected);
      int64_t all_tokens = 0;
      for (const grpo_test::Prompt& prompt : f.prompts) all_tokens += tokens_of(prompt.completions);
      // Unselected tokens still count as units (TRL).
      check_every_split(f, run, expected_loss, expected, all_tokens);

      // The kept tokens, one by one, against entropies recomputed from the logits.
      std::vector<double> entropies;
      std::vector<at::Tensor> per_completion;
      for (const grpo_test::Prompt& prompt : f.prompts) {
        for (const std::string& text : prompt.completions) {
          per_completion.push_back(
              grpo_test::reference_token_entropies(*f.policy, prompt.prompt, grpo_test::completion_ids(text)));
          for (int64_t t = 0; t < per_completion.back().size(0); ++t) {
            entropies.push_back(per_completion.back()[t].item<double>());
          }
        }
      }
      const double threshold = grpo_test::linear_quantile(entropies, 1.0 - rho);
      double margin = 1.0;
      for (const double h : entropies) margin = std::min(margin, std::abs(h - threshold));
      INFO("threshold " << threshold << ", nearest entropy " << margin << " away");
      REQUIRE(margin > 1e-4);  // the float32 entropies of the model cannot fall on the other side
      const std::vector<grpo::ScoredCompletion>& completions = run.module.completions();
      REQUIRE(completions.size() == per_completion.size());
      int64_t kept = 0;
      for (size_t i = 0; i < completions.size(); ++i) {
        INFO("completion " << i);
        REQUIRE(completions[i].entropy_keep.defined());
        CHECK(at::equal(completions[i].entropy_keep, per_completion[i] >= threshold));
        kept += completions[i].entropy_keep.sum().item<int64_t>();
      }
      // Linear interpolation at position (1 − ρ)(n − 1) keeps the ⌊ρ·(n − 1)⌋ + 1 largest (no ties).
      REQUIRE(entropies.size() == 37);
      CHECK(kept == static_cast<int64_t>(std::floor(rho * 36.0)) + 1);
    }
  }
}

TEST_CASE("normalize_then_sum: TRL's advantages, worked out by hand on 2 prompts × G = 4", "[grpo]") {
  // accuracy and format (^-?[0-9]+$, ended by <eos>), weights 1 and 0.5:
  //   "1+1=" → 2:  "2" "3" "x" "22"   accuracy (1, 0, 0, 0)   format (1, 1, 0, 1)
  //   "2+2=" → 4:  "4" "4" "y" "5"    accuracy (1, 1, 0, 0)   format (1, 1, 0, 1)
  // Each function normalised within its group, (r − mean) / (unbiased std + 1e-4):
  //   accuracy (1, 0, 0, 0): mean 1/4, std √((9/16 + 3/16) / 3) = 1/2  → (3/4, −1/4, −1/4, −1/4)·a
  //   format (1, 1, 0, 1):   mean 3/4, std 1/2                        → (1/4, 1/4, −3/4, 1/4)·a
  //   accuracy (1, 1, 0, 0): mean 1/2, std √(1/3)                     → (b, b, −b, −b)
  // with a = 1 / (1/2 + 1e-4) = 1.99960008 and b = (1/2) / (√(1/3) + 1e-4) = 0.86587543.
  // c = accuracy + 0.5·format:
  //   "1+1=": (7/8·a, −1/8·a, −5/8·a, −1/8·a)             = (1.74965007, −0.24995001, −1.24975005, −0.24995001)
  //   "2+2=": (b + a/8, b + a/8, −b − 3/8·a, −b + a/8)    = (1.11582544, 1.11582544, −1.61572546, −0.61592542)
  // Over the whole batch: mean(c) = 0 (each group's c sums to 0), Σc² = 10.22816628,
  // s(c) = √(10.22816628 / 7) = 1.20878725; A = c / (s(c) + 1e-4).
  const std::vector<double> expected{1.44732279, -0.20676040, -1.03380200, -0.20676040,
                                     0.92301862, 0.92301862,  -1.33653942, -0.50949782};
  const std::vector<grpo_test::Prompt> prompts{{"1+1=", "2", {"2", "3", "x", "22"}},
                                               {"2+2=", "4", {"4", "4", "y", "5"}}};
  // The reference of grpo_test_support.h gives the same numbers.
  const std::vector<std::vector<double>> reference =
      grpo_test::reference_normalize_then_sum({{{1, 0, 0, 0}, {1, 1, 0, 0}}, {{1, 1, 0, 1}, {1, 1, 0, 1}}}, {1.0, 0.5});
  for (size_t i = 0; i < expected.size(); ++i) CHECK(reference[i / 4][i % 4] == Approx(expected[i]).epsilon(1e-8));

  // scale_rewards does not act under normalize_then_sum (as in TRL).
  for (const std::string scale : {"group", "batch", "none"}) {
    DYNAMIC_SECTION("scale_rewards " << scale) {
      Fixture f(prompts);
      const sdk::ConfigValues values =
          grpo_test::grpo_values({{"num_generations", int64_t{4}},
                                  {"reward_funcs", std::vector<std::string>{"accuracy", "format"}},
                                  {"reward_weights", std::vector<double>{1.0, 0.5}},
                                  {"reward_aggregation", std::string("normalize_then_sum")},
                                  {"scale_rewards", scale}});
      Run run(f, values);
      const dpo_test::StepOutcome outcome =
          dpo_test::run_step(run.module, run.context, f.pointers, {8, 0}, f.parameters, *f.communicator);
      CHECK(outcome.metrics.at("reward") == Approx((3.0 + 0.5 * 6.0) / 8.0));
      const std::vector<grpo::ScoredCompletion>& completions = run.module.completions();
      REQUIRE(completions.size() == expected.size());
      for (size_t i = 0; i < expected.size(); ++i) {
        INFO("completion " << i);
        CHECK(completions[i].advantage == Approx(expected[i]).epsilon(1e-8));
      }
    }
  }
}

TEST_CASE("reward_aggregation = normalize_then_sum gives TRL's objective for every scale_rewards and split", "[grpo]") {
  // accuracy and format (^-?[0-9]+$, ended by <eos>) of the default table, by hand.
  const std::vector<std::vector<double>> accuracy{{1, 0, 0}, {1, 1, 1}, {1, 0, 0}, {0, 1, 0}};
  const std::vector<std::vector<double>> format{{1, 1, 1}, {1, 1, 1}, {1, 0, 0}, {0, 0, 0}};
  for (const std::string scale : {"group", "batch", "none"}) {
    DYNAMIC_SECTION("scale_rewards " << scale) {
      Fixture f(grpo_test::global_batch_prompts());
      const sdk::ConfigValues values =
          grpo_test::grpo_values({{"reward_funcs", std::vector<std::string>{"accuracy", "format"}},
                                  {"reward_weights", std::vector<double>{1.0, 0.5}},
                                  {"reward_aggregation", std::string("normalize_then_sum")},
                                  {"scale_rewards", scale}});
      Run run(f, values);
      grpo_test::ReferenceSpec spec;
      spec.scale_rewards = scale;
      spec.function_rewards = {accuracy, format};
      spec.reward_weights = {1.0, 0.5};
      spec.normalize_then_sum = true;
      std::vector<at::Tensor> expected;
      const at::Tensor expected_loss = expected_gradient(f, spec, expected);
      int64_t all_tokens = 0;
      for (const grpo_test::Prompt& prompt : f.prompts) all_tokens += tokens_of(prompt.completions);
      check_every_split(f, run, expected_loss, expected, all_tokens);

      // Not the same objective as normalising the weighted sum (else the test proves nothing).
      spec.normalize_then_sum = false;
      std::vector<at::Tensor> summed;
      expected_gradient(f, spec, summed);
      CHECK(testing::relative_error(summed, expected) > 1e-2);

      const dpo_test::StepOutcome outcome =
          dpo_test::run_step(run.module, run.context, f.pointers, {4, 0}, f.parameters, *f.communicator);
      CHECK(outcome.metrics.at("rewards/accuracy/mean") == Approx(6.0 / 12.0));
      CHECK(outcome.metrics.at("rewards/format/mean") == Approx(7.0 / 12.0));
      CHECK(outcome.metrics.at("reward") == Approx((6.0 + 0.5 * 7.0) / 12.0));
    }
  }
}

TEST_CASE("GSPO: the second update of num_iterations = 2 uses the sequence-level ratio", "[grpo]") {
  for (const double epsilon : {0.2, 0.05}) {
    DYNAMIC_SECTION("epsilon " << epsilon) {
      Fixture f(grpo_test::global_batch_prompts(), 44);
      const auto initial = f.policy->frozen_copy();
      const sdk::ConfigValues values = grpo_test::grpo_values({{"num_iterations", int64_t{2}},
                                                               {"importance_sampling_level", std::string("sequence")},
                                                               {"epsilon_low", epsilon}});
      Run run(f, values);
      const dpo_test::StepOutcome first =
          dpo_test::run_step(run.module, run.context, f.pointers, {4, 0}, f.parameters, *f.communicator);
      CHECK(first.metrics.at("clip_ratio/region_mean") == 0.0);
      {
        const at::NoGradGuard no_grad;
        for (const at::Tensor& parameter : f.parameters) parameter.sub_(parameter.grad() * 5.0);  // SGD, lr 5
      }
      run.host.set_step(1, 0);

      grpo_test::ReferenceSpec spec;
      spec.epsilon = epsilon;
      spec.sequence_level = true;
      std::vector<at::Tensor> expected;
      const at::Tensor expected_loss = expected_gradient(f, spec, expected, initial.get());
      // At a ratio ≠ 1 the token-level objective is another one.
      spec.sequence_level = false;
      std::vector<at::Tensor> token_level;
      const at::Tensor token_loss = expected_gradient(f, spec, token_level, initial.get());
      CHECK(testing::relative_error(token_level, expected) > 1e-3);
      CHECK(std::abs(token_loss.item<double>() - expected_loss.item<double>()) > 1e-6);

      check_second_update_every_split(f, run, expected_loss, expected);
    }
  }
}

TEST_CASE("num_iterations = 2 with ε_low ≠ ε_high and a dual-clip δ: the second update over every split", "[grpo]") {
  // DAPO's clip-higher ε and verl's default dual-clip bound (clip_ratio_c).
  constexpr double kEpsilonLow = 0.2;
  constexpr double kEpsilonHigh = 0.28;
  constexpr double kDelta = 3.0;
  Fixture f(grpo_test::global_batch_prompts(), 45);
  const auto initial = f.policy->frozen_copy();
  const sdk::ConfigValues values = grpo_test::grpo_values({{"num_iterations", int64_t{2}},
                                                           {"epsilon_low", kEpsilonLow},
                                                           {"epsilon_high", kEpsilonHigh},
                                                           {"delta", kDelta}});
  Run run(f, values);
  dpo_test::run_step(run.module, run.context, f.pointers, {4, 0}, f.parameters, *f.communicator);
  {
    const at::NoGradGuard no_grad;
    for (const at::Tensor& parameter : f.parameters) parameter.sub_(parameter.grad() * 2.0);  // SGD, lr 2
  }
  run.host.set_step(1, 0);

  // Every branch of the objective acts on some token: ratios from unpadded forwards, accuracy advantages.
  std::vector<std::vector<double>> accuracy;
  for (const grpo_test::Prompt& prompt : f.prompts) {
    std::vector<double> group;
    for (const std::string& text : prompt.completions) group.push_back(text == prompt.answer ? 1.0 : 0.0);
    accuracy.push_back(group);
  }
  const std::vector<grpo_test::TokenRatio> tokens = grpo_test::reference_token_ratios(
      *f.policy, *initial, f.prompts, grpo_test::reference_advantages(accuracy, "group"));
  int64_t low = 0, between = 0, high = 0, dual = 0;
  double margin = 1.0;
  for (const grpo_test::TokenRatio& token : tokens) {
    low += token.advantage < 0 && token.ratio < 1.0 - kEpsilonLow;
    between += token.advantage > 0 && token.ratio > 1.0 + kEpsilonLow && token.ratio <= 1.0 + kEpsilonHigh;
    high += token.advantage > 0 && token.ratio > 1.0 + kEpsilonHigh;
    dual += token.advantage < 0 && token.ratio > kDelta;
    for (const double bound : {1.0 - kEpsilonLow, 1.0 + kEpsilonLow, 1.0 + kEpsilonHigh, kDelta}) {
      margin = std::min(margin, std::abs(token.ratio - bound));
    }
  }
  INFO("clipped low " << low << ", between ε_low and ε_high " << between << ", clipped high " << high
                      << ", dual-clipped " << dual << ", nearest bound " << margin);
  REQUIRE(low > 0);
  REQUIRE(between > 0);
  REQUIRE(high > 0);
  REQUIRE(dual > 0);
  REQUIRE(margin > 1e-5);  // float rounding cannot put a ratio on the other side of a bound

  grpo_test::ReferenceSpec spec;
  spec.epsilon = kEpsilonLow;
  spec.epsilon_high = kEpsilonHigh;
  spec.delta = kDelta;
  std::vector<at::Tensor> expected;
  const at::Tensor expected_loss = expected_gradient(f, spec, expected, initial.get());
  // Without the separate ε_high, or without δ, the objective is another one.
  for (const bool symmetric : {true, false}) {
    grpo_test::ReferenceSpec other = spec;
    if (symmetric) {
      other.epsilon_high.reset();
    } else {
      other.delta.reset();
    }
    std::vector<at::Tensor> gradient;
    expected_gradient(f, other, gradient, initial.get());
    INFO((symmetric ? "ε_high = ε_low" : "no dual clip"));
    CHECK(testing::relative_error(gradient, expected) > 1e-3);
  }

  check_second_update_every_split(f, run, expected_loss, expected);
}
