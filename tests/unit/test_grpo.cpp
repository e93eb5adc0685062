// GRPO: group advantages against their closed form; with fixed rollouts
// injected, the step gradient of every loss_type (and every KL estimator at
// beta > 0) equals the independent full-batch reference
// (grpo_test_support.h) for micro sizes 1, 2, 4 and the whole batch; num_iterations = 1 gives a ratio of exactly 1, and
// the second update of num_iterations = 2 uses the stored old log-probs. World size 2: tests/dist.
#include "catch.h"

#include "grpo_test_support.h"

#include "dpo_test_support.h"

#include "core/checkpoint/remove_tree.h"
#include "core/plugin/host_context.h"
#include "grpo_advantages.h"
#include "grpo_loss.h"
#include "grpo_module.h"
#include "grpo_rewards.h"
#include "support/run_command.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <filesystem>

namespace {

using namespace ptrain;
namespace fs = std::filesystem;

// The injected global batch of grpo_test_support.h for one process.
struct Batch {
  tokenizer::ByteTokenizer tokenizer;
  std::vector<grpo_test::Prompt> prompts = grpo_test::global_batch_prompts();
  std::vector<sdk::Example> examples = grpo_test::to_examples(prompts);
  std::vector<const sdk::Example*> pointers = dpo_test::pointers_to(examples);
  std::unique_ptr<dist::Communicator> communicator = dist::make_single_process_communicator();
};

}  // namespace

TEST_CASE("group advantages follow each scale_rewards option, a zero-variance group gets 0", "[grpo]") {
  // Group 0: (1, 0, 0, 1), mean 0.5, unbiased std √(1/3); group 1: all 2 (zero variance).
  const at::Tensor rewards = at::tensor({1.0, 0.0, 0.0, 1.0, 2.0, 2.0, 2.0, 2.0}, at::kDouble).view({2, 4});
  const double group_std = std::sqrt(1.0 / 3.0);
  const at::Tensor by_group = grpo::group_advantages(rewards, grpo::ScaleRewards::kGroup, 0.0);
  CHECK(by_group[0][0].item<double>() == Approx(0.5 / (group_std + 1e-4)).epsilon(1e-12));
  CHECK(by_group[0][1].item<double>() == Approx(-0.5 / (group_std + 1e-4)).epsilon(1e-12));
  CHECK(at::equal(by_group[1], at::zeros({4}, at::kDouble)));

  // Batch std of (1, 0, 0, 1, 2, 2, 2, 2): mean 1.25, Σ(r − mean)² = 5.5, /7.
  const double batch_std = grpo::std_from_sums(8.0, 10.0, 18.0);
  CHECK(batch_std == Approx(std::sqrt(5.5 / 7.0)).epsilon(1e-12));
  const at::Tensor by_batch = grpo::group_advantages(rewards, grpo::ScaleRewards::kBatch, batch_std);
  CHECK(by_batch[0][0].item<double>() == Approx(0.5 / (batch_std + 1e-4)).epsilon(1e-12));
  CHECK(at::equal(by_batch[1], at::zeros({4}, at::kDouble)));

  const at::Tensor unscaled = grpo::group_advantages(rewards, grpo::ScaleRewards::kNone, 0.0);
  CHECK(at::allclose(unscaled[0], at::tensor({0.5, -0.5, -0.5, 0.5}, at::kDouble)));
  CHECK(at::equal(unscaled[1], at::zeros({4}, at::kDouble)));
}

TEST_CASE("advantages of a [P, G, F] reward tensor, by hand, for each aggregation and scale_rewards", "[grpo]") {
  // 2 prompts × G = 3 × 2 functions, weights (1, 0.5):
  //   r_0 = (1, 0, 0 | 1, 1, 0),  r_1 = (1, 1, 0 | 0, 0, 0)
  //   r = r_0 + 0.5·r_1 = (1.5, 0.5, 0 | 1, 1, 0), group means 2/3 and 2/3,
  //   centred (5/6, −1/6, −2/3 | 1/3, 1/3, −2/3), group stds √(7/12) and √(1/3).
  // Over the batch: n = 6, Σr = 4, Σr² = 4.5, s(r) = √((4.5 − 16/6) / 5) = √(11/30).
  const at::Tensor rewards = at::stack({at::tensor({1.0, 0.0, 0.0, 1.0, 1.0, 0.0}, at::kDouble).view({2, 3}),
                                        at::tensor({1.0, 1.0, 0.0, 0.0, 0.0, 0.0}, at::kDouble).view({2, 3})},
                                       2);  // [2, 3, 2]
  const std::vector<double> centred{5.0 / 6, -1.0 / 6, -2.0 / 3, 1.0 / 3, 1.0 / 3, -2.0 / 3};
  const std::vector<double> group_stds{std::sqrt(7.0 / 12), std::sqrt(1.0 / 3)};
  const double batch_std = std::sqrt(11.0 / 30);
  grpo::AdvantageSettings settings{{1.0, 0.5}, grpo::RewardAggregation::kSumThenNormalize, grpo::ScaleRewards::kGroup};

  const grpo::RewardSums sums = grpo::local_reward_sums(rewards, settings);
  CHECK(sums.completions == 6.0);
  CHECK(sums.total == Approx(4.0));
  CHECK(sums.total_squares == Approx(4.5));
  CHECK(sums.combined == 0.0);
  CHECK(sums.function == std::vector<double>{3.0, 2.0});
  CHECK(sums.function_squares == std::vector<double>{3.0, 2.0});
  // s(r_0) = √((3 − 9/6) / 5), s(r_1) = √((2 − 4/6) / 5).
  const std::vector<double> function_stds = grpo::function_batch_stds(sums);
  CHECK(function_stds[0] == Approx(std::sqrt(0.3)).epsilon(1e-12));
  CHECK(function_stds[1] == Approx(std::sqrt(4.0 / 15)).epsilon(1e-12));

  const auto check = [](const at::Tensor& actual, const std::vector<double>& expected) {
    REQUIRE(actual.numel() == static_cast<int64_t>(expected.size()));
    const at::Tensor flat = actual.reshape({-1});
    for (size_t i = 0; i < expected.size(); ++i) {
      INFO("completion " << i);
      CHECK(flat[static_cast<int64_t>(i)].item<double>() == Approx(expected[i]).epsilon(1e-12).margin(1e-15));
    }
  };
  for (const grpo::ScaleRewards scale :
       {grpo::ScaleRewards::kGroup, grpo::ScaleRewards::kBatch, grpo::ScaleRewards::kNone}) {
    DYNAMIC_SECTION("sum_then_normalize, scale_rewards " << static_cast<int>(scale)) {
      settings.scale = scale;
      const grpo::Advantages out = grpo::compute_advantages(rewards, settings, sums);
      std::vector<double> expected;
      for (size_t i = 0; i < centred.size(); ++i) {
        const double divisor = scale == grpo::ScaleRewards::kGroup   ? group_stds[i / 3] + 1e-4
                               : scale == grpo::ScaleRewards::kBatch ? batch_std + 1e-4
                                                                     : 1.0;
        expected.push_back(centred[i] / divisor);
      }
      check(out.advantage, expected);
      check(out.reward, {1.5, 0.5, 0.0, 1.0, 1.0, 0.0});
      check(out.group_std, group_stds);
    }
  }

  // normalize_then_sum: r_0's groups (1, 0, 0) and (1, 1, 0) both have std √(1/3), r_1's (1, 1, 0) too and
  // (0, 0, 0) none; with a = 1 / (√(1/3) + 1e-4):
  //   c = a·(2/3, −1/3, −1/3 | 1/3, 1/3, −2/3) + 0.5·a·(1/3, 1/3, −2/3 | 0, 0, 0)
  //     = a·(5/6, −1/6, −2/3 | 1/3, 1/3, −2/3)
  // Σc = 0, Σc² = a²·11/6, s(c) = a·√(11/30); A = c / (s(c) + 1e-4), whatever scale_rewards says.
  const double a = 1.0 / (std::sqrt(1.0 / 3) + 1e-4);
  std::vector<double> expected;
  for (const double c : centred) expected.push_back(a * c / (a * batch_std + 1e-4));
  for (const grpo::ScaleRewards scale :
       {grpo::ScaleRewards::kGroup, grpo::ScaleRewards::kBatch, grpo::ScaleRewards::kNone}) {
    DYNAMIC_SECTION("normalize_then_sum, scale_rewards " << static_cast<int>(scale)) {
      settings = {{1.0, 0.5}, grpo::RewardAggregation::kNormalizeThenSum, scale};
      const grpo::RewardSums combined_sums = grpo::local_reward_sums(rewards, settings);
      CHECK(combined_sums.combined == Approx(0.0).margin(1e-12));
      CHECK(combined_sums.combined_squares == Approx(a * a * 11.0 / 6).epsilon(1e-12));
      check(grpo::compute_advantages(rewards, settings, combined_sums).advantage, expected);
    }
  }
}

TEST_CASE("advantages from reward sums packed, summed over ranks and unpacked equal the whole batch's", "[grpo]") {
  const at::Tensor rewards = at::tensor({1.0, 0.0, 0.25, 1.0, 1.0, 0.0, 0.5, 2.0, 0.0, 1.0, 1.0, 0.0}, at::kDouble)
                                 .view({2, 3, 2});  // [P, G, F]
  for (const auto aggregation :
       {grpo::RewardAggregation::kSumThenNormalize, grpo::RewardAggregation::kNormalizeThenSum}) {
    const grpo::AdvantageSettings settings{{1.0, 0.5}, aggregation, grpo::ScaleRewards::kBatch};
    const grpo::RewardSums whole = grpo::local_reward_sums(rewards, settings);
    // Two "ranks" with one prompt each: the sum of their packed sums is the whole batch's.
    const at::Tensor packed = grpo::pack_reward_sums(grpo::local_reward_sums(rewards.narrow(0, 0, 1), settings)) +
                              grpo::pack_reward_sums(grpo::local_reward_sums(rewards.narrow(0, 1, 1), settings));
    CHECK(packed.size(0) == 5 + 2 * 2);
    const grpo::RewardSums global = grpo::unpack_reward_sums(packed, 2);
    CHECK(global.completions == whole.completions);
    CHECK(global.total == Approx(whole.total).epsilon(1e-14));
    CHECK(global.total_squares == Approx(whole.total_squares).epsilon(1e-14));
    CHECK(global.combined == Approx(whole.combined).margin(1e-14));
    CHECK(global.combined_squares == Approx(whole.combined_squares).epsilon(1e-14));
    CHECK(global.function == whole.function);
    CHECK(global.function_squares == whole.function_squares);
    const at::Tensor expected = grpo::compute_advantages(rewards, settings, whole).advantage;
    const at::Tensor split = at::cat({grpo::compute_advantages(rewards.narrow(0, 0, 1), settings, global).advantage,
                                      grpo::compute_advantages(rewards.narrow(0, 1, 1), settings, global).advantage});
    CHECK(at::allclose(split, expected, 1e-12, 1e-12));
  }
}

TEST_CASE("the GRPO token loss: clipping, dual-clip and the KL estimators on hand-made values", "[grpo]") {
  grpo::GrpoConfig config = grpo::default_grpo_config();
  config.epsilon_low = 0.2;
  config.epsilon_high = 0.28;
  grpo::TokenLossInputs inputs;
  // Ratios e^0.5 ≈ 1.65 (A = +1 → clipped at 1.28) and e^−0.5 ≈ 0.61 (A = −1 → clipped at 0.8).
  inputs.log_probs = at::tensor({-1.0, -2.0}, at::kDouble).view({2, 1});
  inputs.old_log_probs = at::tensor({-1.5, -1.5}, at::kDouble).view({2, 1});
  inputs.advantages = at::tensor({1.0, -1.0}, at::kDouble);
  inputs.mask = at::ones({2, 1}, at::kBool);
  grpo::TokenLoss out = grpo::grpo_token_loss(inputs, config);
  CHECK(out.loss[0][0].item<double>() == Approx(-1.28));
  CHECK(out.loss[1][0].item<double>() == Approx(0.8));  // −min(−0.61, −0.8)
  CHECK(out.high_clipped[0][0].item<bool>());
  CHECK(out.low_clipped[1][0].item<bool>());
  // Dual clip: a negative advantage with a huge ratio is bounded by −A·δ.
  inputs.log_probs = at::tensor({0.0, 0.0}, at::kDouble).view({2, 1});
  inputs.old_log_probs = at::tensor({-3.0, -3.0}, at::kDouble).view({2, 1});
  config.delta = 3.0;
  out = grpo::grpo_token_loss(inputs, config);
  CHECK(out.loss[1][0].item<double>() == Approx(3.0));    // min(e³, 3)
  CHECK(out.loss[0][0].item<double>() == Approx(-1.28));  // positive advantage: unchanged
  // KL with x = log π_ref − log π = −1: k1 = 1, k2 = 0.5, k3 = e⁻¹ + 1 − 1.
  config.delta.reset();
  config.beta = 1.0;
  inputs.log_probs = at::tensor({-1.0}, at::kDouble).view({1, 1});
  inputs.old_log_probs = inputs.log_probs;
  inputs.ref_log_probs = at::tensor({-2.0}, at::kDouble).view({1, 1});
  inputs.advantages = at::zeros({1}, at::kDouble);
  inputs.mask = at::ones({1, 1}, at::kBool);
  for (const auto& [estimator, expected] : std::vector<std::pair<grpo::KlEstimator, double>>{
           {grpo::KlEstimator::kK1, 1.0}, {grpo::KlEstimator::kK2, 0.5}, {grpo::KlEstimator::kK3, std::exp(-1.0)}}) {
    config.kl_estimator = estimator;
    CHECK(grpo::grpo_token_loss(inputs, config).kl[0][0].item<double>() == Approx(expected));
  }
}

TEST_CASE("the GRPO step gradient equals the full-batch reference for every loss_type and split",
          "[grpo][invariance]") {
  const auto policy = model::CausalLm::init_random(testing::tiny_model_config(), 21);
  // A KL reference that differs from the policy, so the KL term has a gradient.
  const fs::path reference_dir = testing::fresh_test_dir("grpo_reference");
  model::CausalLm::init_random(testing::tiny_model_config(), 23)->save_hf_dir(reference_dir);
  const auto reference = model::CausalLm::load_hf_dir(reference_dir);
  const std::vector<at::Tensor> parameters = dpo_test::parameters_of(*policy);
  Batch batch;
  const auto& [tokenizer, prompts, examples, pointers, communicator] = batch;

  struct Case {
    std::string loss_type;
    std::string scale_rewards;
    bool mask_truncated;
    bool sequence_level;
    std::string kl_estimator;  // used with beta > 0
  };
  for (const Case& c : {Case{"dapo", "group", false, false, "k1"}, Case{"bnpo", "batch", true, false, "k2"},
                        Case{"grpo", "group", false, true, "k3"}, Case{"dr_grpo", "none", true, false, "k2"},
                        Case{"dapo", "none", false, false, "k3"}, Case{"grpo", "batch", true, false, "k1"}}) {
    for (const double beta : {0.0, 0.1}) {
      DYNAMIC_SECTION("loss_type " << c.loss_type << ", scale_rewards " << c.scale_rewards << ", beta " << beta
                                   << ", kl_estimator " << c.kl_estimator) {
        const sdk::ConfigValues values =
            grpo_test::grpo_values({{"loss_type", c.loss_type},
                                    {"scale_rewards", c.scale_rewards},
                                    {"mask_truncated_completions", c.mask_truncated},
                                    {"importance_sampling_level", std::string(c.sequence_level ? "sequence" : "token")},
                                    {"beta", beta},
                                    {"kl_estimator", c.kl_estimator},
                                    {"reference_model", std::string(beta > 0 ? reference_dir.string() : "")}});
        plugin::HostContext host(*policy, tokenizer, values, *communicator,
                                 sdk::RunInfo{0, grpo_test::kMaxLength, 0, 0, ""});
        grpo_test::FixedRolloutEngine engine(prompts);
        grpo_test::InjectedContext context(host, engine);
        grpo::GrpoModule module;
        module.setup(context);

        grpo_test::ReferenceSpec spec;
        spec.loss_type = c.loss_type;
        spec.scale_rewards = c.scale_rewards;
        spec.mask_truncated = c.mask_truncated;
        spec.sequence_level = c.sequence_level;
        spec.beta = beta;
        spec.kl_estimator = c.kl_estimator;
        dpo_test::clear_gradients(parameters);
        const at::Tensor expected_loss =
            grpo_test::reference_step_loss(*policy, nullptr, reference.get(), prompts, spec);
        expected_loss.backward();
        const std::vector<at::Tensor> expected = dpo_test::gradients_of(parameters);

        for (const int64_t micro_size : {1, 2, 4, 12}) {
          INFO("micro_size " << micro_size);
          const dpo_test::StepOutcome outcome =
              dpo_test::run_step(module, context, pointers, {micro_size, 0}, parameters, *communicator);
          REQUIRE(outcome.gradient.has_units);
          CHECK(outcome.gradient.num_microbatches == (12 + micro_size - 1) / micro_size);
          const double error = testing::relative_error(outcome.grads, expected);
          INFO("relative gradient error " << error);
          CHECK(error <= 1e-5);
          CHECK(outcome.metrics.at("core/loss") == Approx(expected_loss.item<double>()).epsilon(1e-5).margin(1e-9));
          // μ = 1: the ratio is exactly 1, nothing is clipped.
          CHECK(outcome.metrics.at("clip_ratio/region_mean") == 0.0);
          CHECK(outcome.metrics.at("reward") == Approx(6.0 / 12.0));
          CHECK(outcome.metrics.at("frac_reward_zero_std") == Approx(0.25));
          CHECK(outcome.metrics.at("completions/max_length") == 8.0);
          CHECK(outcome.metrics.at("completions/min_length") == 2.0);
          CHECK(outcome.metrics.at("completions/clipped_ratio") == Approx(1.0 / 12.0));
        }
        CHECK(engine.calls == 4);  // one generation per step, whatever the number of microbatches

        // μ = 1: π_old is π detached, so every trained token's ratio is exactly 1, not merely unclipped.
        int64_t trained_tokens = 0;
        for (const auto& microbatch : module.prepare(context, pointers, {4, 0})) {
          const auto& batch = static_cast<const grpo::GrpoMicrobatch&>(*microbatch);
          const at::Tensor ratio = module.token_terms(context, batch).token_loss.ratio;
          const at::Tensor trained = ratio.masked_select(batch.tokens.loss_mask);
          CHECK(at::equal(trained, at::ones_like(trained)));
          trained_tokens += trained.numel();
        }
        CHECK(trained_tokens == (c.mask_truncated ? 29 : 37));  // completion tokens (the truncated one: 8)
      }
    }
  }
  ptrain::checkpoint::remove_tree(reference_dir);
}

TEST_CASE("num_iterations = 2: the second update reuses the rollouts and their stored old log-probs", "[grpo]") {
  auto policy = model::CausalLm::init_random(testing::tiny_model_config(), 22);
  const auto initial = policy->frozen_copy();
  const std::vector<at::Tensor> parameters = dpo_test::parameters_of(*policy);
  Batch batch;
  const auto& [tokenizer, prompts, examples, pointers, communicator] = batch;
  const sdk::ConfigValues values = grpo_test::grpo_values({{"num_iterations", int64_t{2}}, {"epsilon_low", 0.02}});
  plugin::HostContext host(*policy, tokenizer, values, *communicator, sdk::RunInfo{0, grpo_test::kMaxLength, 0, 0, ""});
  grpo_test::FixedRolloutEngine engine(prompts);
  grpo_test::InjectedContext context(host, engine);
  grpo::GrpoModule module;
  module.setup(context);

  const dpo_test::StepOutcome first = dpo_test::run_step(module, context, pointers, {4, 0}, parameters, *communicator);
  CHECK(first.metrics.at("clip_ratio/region_mean") == 0.0);  // π = π_old before any update
  {
    const at::NoGradGuard no_grad;
    for (const at::Tensor& parameter : parameters) parameter.sub_(parameter.grad() * 20.0);  // SGD, lr 20
  }
  host.set_step(1, 0);
  // The sampler's prompts of step 1 are ignored: an empty list must not matter.
  const dpo_test::StepOutcome second = dpo_test::run_step(module, context, {}, {4, 0}, parameters, *communicator);
  CHECK(engine.calls == 1);

  grpo_test::ReferenceSpec spec;
  spec.epsilon = 0.02;
  dpo_test::clear_gradients(parameters);
  const at::Tensor expected_loss = grpo_test::reference_step_loss(*policy, initial.get(), nullptr, prompts, spec);
  expected_loss.backward();
  const double error = testing::relative_error(second.grads, dpo_test::gradients_of(parameters));
  INFO("relative gradient error " << error);
  CHECK(error <= 1e-5);
  CHECK(second.metrics.at("core/loss") == Approx(expected_loss.item<double>()).epsilon(1e-5));
  CHECK(second.metrics.at("clip_ratio/region_mean") > 0.0);  // the stored π_old differs from the updated π

  host.set_step(2, 0);
  dpo_test::run_step(module, context, pointers, {4, 0}, parameters, *communicator);
  CHECK(engine.calls == 2);  // a new cycle generates again
}

TEST_CASE("the built-in rewards score what their definitions say", "[grpo]") {
  grpo::GrpoConfig config = grpo::default_grpo_config();
  config.max_completion_length = 8;
  config.overlong_cache = 4;
  config.format_pattern = "^-?[0-9]+$";
  const sdk::Example example{0, "prompts.jsonl:1", nlohmann::json{{"prompt", "40+2="}, {"answer", "42"}}};
  auto input = [&](const std::string& completion, int64_t tokens, bool truncated) {
    return sdk::RewardInput{&example, "40+2=", completion, tokens, truncated};
  };
  const std::vector<sdk::RewardInput> inputs{input("42", 3, false), input(" 42\n", 5, false), input("45", 7, false),
                                             input("4x", 8, true), input("1234567890", 10, true)};
  auto scores = [&](const char* name) { return sdk::make_builtin_reward(name, grpo::builtin_reward_settings(config))->score(inputs); };
  CHECK(scores("accuracy") == std::vector<double>{1, 1, 0, 0, 0});
  CHECK(scores("format") == std::vector<double>{1, 1, 1, 0, 0});
  // Free up to 8 − 4 = 4 tokens, then (4 − |y|) / 4, −1 beyond 8.
  CHECK(scores("length") == std::vector<double>{0, -0.25, -0.75, -1, -1});
  const std::vector<double> closeness = scores("closeness");
  CHECK(closeness[0] == 1.0);
  CHECK(closeness[2] == Approx(0.7));
  CHECK(closeness[3] == 0.0);
  CHECK(closeness[4] == 0.0);
  const sdk::Example no_answer{1, "prompts.jsonl:2", nlohmann::json{{"prompt", "1+1="}}};
  CHECK_THROWS_WITH(sdk::make_builtin_reward("accuracy", grpo::builtin_reward_settings(config))->score({{&no_answer, "", "2", 2, false}}),
                    Catch::Contains("prompts.jsonl:2") && Catch::Contains("answer"));
}

TEST_CASE("GRPO metrics equal their formulas: reward stds, entropy, kl and clip ratios with ε_low ≠ ε_high",
          "[grpo][metrics]") {
  auto policy = model::CausalLm::init_random(testing::tiny_model_config(), 24);
  const auto initial = policy->frozen_copy();
  const fs::path reference_dir = testing::fresh_test_dir("grpo_metrics_reference");
  model::CausalLm::init_random(testing::tiny_model_config(), 25)->save_hf_dir(reference_dir);
  const auto reference = model::CausalLm::load_hf_dir(reference_dir);
  const std::vector<at::Tensor> parameters = dpo_test::parameters_of(*policy);
  Batch batch;
  const auto& [tokenizer, prompts, examples, pointers, communicator] = batch;
  constexpr double kEpsilonLow = 0.05;
  constexpr double kEpsilonHigh = 0.2;
  const sdk::ConfigValues values =
      grpo_test::grpo_values({{"reward_funcs", std::vector<std::string>{"accuracy", "format"}},
                              {"reward_weights", std::vector<double>{1.0, 0.5}},
                              {"num_iterations", int64_t{2}},
                              {"epsilon_low", kEpsilonLow},
                              {"epsilon_high", kEpsilonHigh},
                              {"beta", 0.05},
                              {"kl_estimator", std::string("k3")},
                              {"reference_model", reference_dir.string()}});
  plugin::HostContext host(*policy, tokenizer, values, *communicator, sdk::RunInfo{0, grpo_test::kMaxLength, 0, 0, ""});
  grpo_test::FixedRolloutEngine engine(prompts);
  grpo_test::InjectedContext context(host, engine);
  grpo::GrpoModule module;
  module.setup(context);

  // Rewards of the table by hand (format: ^-?[0-9]+$ and ended by <eos>), r = accuracy + 0.5·format:
  //   "1+1=":  accuracy (1, 0, 0)  format (1, 1, 1)  r (1.5, 0.5, 0.5)  mean 5/6, std √((4/9 + 1/9 + 1/9) / 2) = √(1/3)
  //   "7*6=":  accuracy (1, 1, 1)  format (1, 1, 1)  r (1.5, 1.5, 1.5)  std 0
  //   "9-4=":  accuracy (1, 0, 0)  format (1, 0, 0)  r (1.5, 0, 0)      mean 1/2, std √((1 + 1/4 + 1/4) / 2) = √(3/4)
  //   "q":     accuracy (0, 1, 0)  format (0, 0, 0)  r (0, 1, 0)        mean 1/3, std √(1/3)
  // reward_std: the mean of the groups' stds; rewards/<fn>/std: the unbiased std over all 12 completions,
  // accuracy six 1s: √(12·(1/4) / 11) = √(3/11); format seven 1s: √((7·(5/12)² + 5·(7/12)²) / 11) = √(35/132).
  const std::vector<std::vector<double>> total{{1.5, 0.5, 0.5}, {1.5, 1.5, 1.5}, {1.5, 0, 0}, {0, 1, 0}};
  const double reward_std = (2.0 * std::sqrt(1.0 / 3.0) + std::sqrt(0.75)) / 4.0;
  const std::vector<std::vector<double>> advantages = grpo_test::reference_advantages(total, "group");

  // Token means over the 37 completion tokens of the table (all trained), from unpadded forwards.
  auto expected_entropy = [&](model::CausalLm& model) {
    double sum = 0.0;
    for (const grpo_test::Prompt& prompt : prompts) {
      for (const std::string& text : prompt.completions) {
        sum += grpo_test::reference_token_entropies(model, prompt.prompt, grpo_test::completion_ids(text))
                   .sum()
                   .item<double>();
      }
    }
    return sum / 37.0;
  };
  auto expected_kl = [&](model::CausalLm& model) {  // k3 = eˣ − x − 1, x = log π_ref − log π
    const at::NoGradGuard no_grad;
    double sum = 0.0;
    for (const grpo_test::Prompt& prompt : prompts) {
      for (const std::string& text : prompt.completions) {
        const std::vector<int64_t> ids = grpo_test::completion_ids(text);
        const at::Tensor x = grpo_test::reference_token_log_probs(*reference, prompt.prompt, ids) -
                             grpo_test::reference_token_log_probs(model, prompt.prompt, ids);
        sum += (at::exp(x) - x - 1.0).sum().item<double>();
      }
    }
    return sum / 37.0;
  };
  auto check_common = [&](const std::map<std::string, double>& metrics) {
    CHECK(metrics.at("reward") == Approx((6.0 + 0.5 * 7.0) / 12.0).epsilon(1e-12));
    CHECK(metrics.at("reward_std") == Approx(reward_std).epsilon(1e-12));
    CHECK(metrics.at("rewards/accuracy/std") == Approx(std::sqrt(3.0 / 11.0)).epsilon(1e-12));
    CHECK(metrics.at("rewards/format/std") == Approx(std::sqrt(35.0 / 132.0)).epsilon(1e-12));
    CHECK(metrics.at("entropy") == Approx(expected_entropy(*policy)).epsilon(1e-5));
    const double kl = expected_kl(*policy);
    REQUIRE(kl > 1e-3);  // the reference differs from the policy
    CHECK(metrics.at("kl") == Approx(kl).epsilon(1e-4));
  };

  const dpo_test::StepOutcome first = dpo_test::run_step(module, context, pointers, {4, 0}, parameters, *communicator);
  check_common(first.metrics);
  CHECK(first.metrics.at("clip_ratio/low_mean") == 0.0);
  CHECK(first.metrics.at("clip_ratio/high_mean") == 0.0);
  CHECK(first.metrics.at("clip_ratio/region_mean") == 0.0);

  {
    const at::NoGradGuard no_grad;
    for (const at::Tensor& parameter : parameters) parameter.sub_(parameter.grad() * 2.0);  // SGD, lr 2
  }
  host.set_step(1, 0);
  const dpo_test::StepOutcome second = dpo_test::run_step(module, context, {}, {5, 0}, parameters, *communicator);
  REQUIRE(engine.calls == 1);
  check_common(second.metrics);

  // Clipped tokens from ratios of unpadded forwards of the updated and the generating policy.
  const std::vector<grpo_test::TokenRatio> tokens =
      grpo_test::reference_token_ratios(*policy, *initial, prompts, advantages);
  REQUIRE(tokens.size() == 37);
  double low = 0, high = 0, between = 0, margin = 1.0;
  for (const grpo_test::TokenRatio& token : tokens) {
    low += token.advantage < 0 && token.ratio < 1.0 - kEpsilonLow ? 1 : 0;
    high += token.advantage > 0 && token.ratio > 1.0 + kEpsilonHigh ? 1 : 0;
    // Clipped under a symmetric ε_low, not under ε_high: only a separate ε_high gets these right.
    between += token.advantage > 0 && token.ratio > 1.0 + kEpsilonLow && token.ratio <= 1.0 + kEpsilonHigh ? 1 : 0;
    for (const double bound : {1.0 - kEpsilonLow, 1.0 + kEpsilonLow, 1.0 + kEpsilonHigh}) {
      margin = std::min(margin, std::abs(token.ratio - bound));
    }
  }
  INFO("low " << low << ", high " << high << ", between ε_low and ε_high " << between << ", nearest bound " << margin);
  REQUIRE(low > 0);
  REQUIRE(high > 0);
  REQUIRE(between > 0);
  REQUIRE(margin > 1e-5);  // float rounding cannot put a ratio on the other side of a bound
  CHECK(second.metrics.at("clip_ratio/low_mean") == Approx(low / 37.0).epsilon(1e-12));
  CHECK(second.metrics.at("clip_ratio/high_mean") == Approx(high / 37.0).epsilon(1e-12));
  CHECK(second.metrics.at("clip_ratio/region_mean") == Approx((low + high) / 37.0).epsilon(1e-12));
  ptrain::checkpoint::remove_tree(reference_dir);
}
