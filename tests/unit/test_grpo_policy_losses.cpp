// The policy losses besides PPO's clip: CISPO (MiniMax-M1, arXiv
// 2506.13585) and SAPO (Qwen, arXiv 2511.20347). Closed forms on hand-made
// values (each token's loss and its gradient w.r.t. log π, worked out here
// from the papers' formulas), then the step gradient against the independent
// full-batch reference of grpo_test_support.h for every aggregation mode,
// with num_iterations 1 and 2, over micro sizes 1, 2, 4 and 12 (world size
// 2: tests/dist).
#include "catch.h"

#include "grpo_step_fixture.h"

#include "grpo_loss.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

using namespace ptrain;
using namespace ptrain::grpo_step;

namespace {

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// One token per row: log π (a leaf, to differentiate), log π_old, A.
struct Tokens {
  at::Tensor log_probs = at::tensor({-1.0, -2.0, -1.2, -0.7}, at::kDouble).view({4, 1}).requires_grad_(true);
  at::Tensor old_log_probs = at::tensor({-1.5, -1.5, -1.2, -0.2}, at::kDouble).view({4, 1});
  at::Tensor advantages = at::tensor({1.0, -1.0, 2.0, 0.0}, at::kDouble);

  grpo::TokenLoss loss(const grpo::GrpoConfig& config) const {
    grpo::TokenLossInputs inputs;
    inputs.log_probs = log_probs;
    inputs.old_log_probs = old_log_probs;
    inputs.advantages = advantages;
    inputs.mask = at::ones({4, 1}, at::kBool);
    return grpo::grpo_token_loss(inputs, config);
  }
  // ∂(Σ ℓ)/∂log π, per row.
  std::vector<double> gradient(const grpo::TokenLoss& out) const {
    if (log_probs.grad().defined()) log_probs.mutable_grad().zero_();
    out.loss.sum().backward();
    const at::Tensor grad = log_probs.grad().view({4});
    return {grad[0].item<double>(), grad[1].item<double>(), grad[2].item<double>(), grad[3].item<double>()};
  }
};

grpo::GrpoConfig config_for(const std::map<std::string, sdk::ConfigValue>& overrides) {
  return grpo::read_grpo_config(grpo_test::grpo_values(overrides));
}

int64_t units_of(const std::string& loss_type) {
  // dapo: the 37 completion tokens of the table; grpo and dr_grpo: its 12 completions.
  return loss_type == "dapo" ? 37 : 12;
}

}  // namespace

TEST_CASE("CISPO on hand-made values: −sg(clip(w))·A·log π, every token keeps its gradient", "[grpo]") {
  const grpo::GrpoConfig config =
      config_for({{"policy_loss", std::string("cispo")}, {"cispo_epsilon_low", 0.2}, {"cispo_epsilon_high", 0.28}});
  REQUIRE(config.policy_loss == grpo::PolicyLoss::kCispo);
  Tokens tokens;
  const grpo::TokenLoss out = tokens.loss(config);
  // w = e^0.5 ≈ 1.65 → ŵ = 1.28; e^−0.5 ≈ 0.61 → 0.8; 1 → 1; e^−0.5 → 0.8 (A = 0).
  const double clipped[] = {1.28, 0.8, 1.0, 0.8};
  const double advantage[] = {1.0, -1.0, 2.0, 0.0};
  const double log_prob[] = {-1.0, -2.0, -1.2, -0.7};
  const std::vector<double> gradient = tokens.gradient(out);
  for (int64_t i = 0; i < 4; ++i) {
    INFO("token " << i);
    CHECK(out.loss[i][0].item<double>() == Approx(-clipped[i] * advantage[i] * log_prob[i]));
    CHECK(gradient[i] == Approx(-clipped[i] * advantage[i]).margin(1e-15));  // ŵ is detached
  }
  // The token above 1 + ε_high with A > 0 still has a gradient (PPO's clip would give 0 there).
  CHECK(gradient[0] != 0.0);
  CHECK(out.high_clipped[0][0].item<bool>());
  CHECK(out.low_clipped[1][0].item<bool>());
  CHECK(out.low_clipped[3][0].item<bool>());  // the weight is clipped whatever A's sign
  CHECK_FALSE((out.low_clipped[2][0] | out.high_clipped[2][0]).item<bool>());

  SECTION("the default ε_low^IS = 1 leaves the weight without a lower bound") {
    const grpo::GrpoConfig defaults = config_for({{"policy_loss", std::string("cispo")}});
    CHECK(defaults.cispo_epsilon_low == 1.0);
    const grpo::TokenLoss unbounded = tokens.loss(defaults);
    CHECK(unbounded.loss[1][0].item<double>() == Approx(-std::exp(-0.5) * -1.0 * -2.0));
    CHECK(unbounded.loss[0][0].item<double>() == Approx(-(1.0 + defaults.cispo_epsilon_high) * 1.0 * -1.0));
  }
}

TEST_CASE("SAPO on hand-made values: −(4/τ)·σ(τ(w − 1))·A and its gradient −4σ(1 − σ)·w·A", "[grpo]") {
  constexpr double kTauPos = 1.0;
  constexpr double kTauNeg = 1.5;
  const grpo::GrpoConfig config =
      config_for({{"policy_loss", std::string("sapo")}, {"sapo_tau_pos", kTauPos}, {"sapo_tau_neg", kTauNeg}});
  REQUIRE(config.policy_loss == grpo::PolicyLoss::kSapo);
  Tokens tokens;
  const grpo::TokenLoss out = tokens.loss(config);
  const double ratio[] = {std::exp(0.5), std::exp(-0.5), 1.0, std::exp(-0.5)};
  const double advantage[] = {1.0, -1.0, 2.0, 0.0};
  const std::vector<double> gradient = tokens.gradient(out);
  for (int64_t i = 0; i < 4; ++i) {
    const double tau = advantage[i] > 0 ? kTauPos : kTauNeg;
    const double gate = sigmoid(tau * (ratio[i] - 1.0));
    INFO("token " << i);
    CHECK(out.loss[i][0].item<double>() == Approx(-(4.0 / tau) * gate * advantage[i]).margin(1e-15));
    CHECK(gradient[i] == Approx(-4.0 * gate * (1.0 - gate) * ratio[i] * advantage[i]).margin(1e-15));
    CHECK_FALSE((out.low_clipped[i][0] | out.high_clipped[i][0]).item<bool>());  // a soft gate clips nothing
  }
  // On-policy (w = 1) the gate passes the plain policy gradient −A; far off-policy it closes.
  CHECK(gradient[2] == Approx(-2.0));
  CHECK(std::abs(gradient[1]) < 1.0);
  Tokens far;
  far.old_log_probs = at::tensor({-4.0, 2.0, -1.2, -0.7}, at::kDouble).view({4, 1});  // w = e³, e⁻⁴
  const std::vector<double> closed = far.gradient(far.loss(config));
  CHECK(std::abs(closed[0]) < 1e-6);  // 4σ(1 − σ)·w at σ(e³ − 1): ≈ 1e-7
  CHECK(std::abs(closed[1]) < 0.1);
  // The same |w − 1| decays faster under the larger τ_neg: w = e^0.5 with A = −1 instead of +1.
  Tokens flipped;
  flipped.advantages = at::tensor({-1.0, -1.0, 2.0, 0.0}, at::kDouble);
  const std::vector<double> negative = flipped.gradient(flipped.loss(config));
  CHECK(std::abs(negative[0]) < std::abs(gradient[0]));
}

TEST_CASE("CISPO and SAPO: the step gradient equals the full-batch reference for every aggregation and split, μ = 1",
          "[grpo][invariance]") {
  for (const std::string policy_loss : {"cispo", "sapo"}) {
    for (const std::string loss_type : {"dapo", "grpo", "dr_grpo"}) {
      DYNAMIC_SECTION("policy_loss " << policy_loss << ", loss_type " << loss_type) {
        Fixture f(grpo_test::global_batch_prompts(), 51);
        const sdk::ConfigValues values =
            grpo_test::grpo_values({{"policy_loss", policy_loss}, {"loss_type", loss_type}});
        Run run(f, values);
        grpo_test::ReferenceSpec spec;
        spec.policy_loss = policy_loss;
        spec.loss_type = loss_type;
        std::vector<at::Tensor> expected;
        const at::Tensor expected_loss = expected_gradient(f, spec, expected);
        check_every_split(f, run, expected_loss, expected, units_of(loss_type));
        CHECK(run.engine.calls == 4);
      }
    }
  }
}

TEST_CASE("CISPO and SAPO: the second update of num_iterations = 2 over every aggregation and split",
          "[grpo][invariance]") {
  struct Case {
    std::string policy_loss;
    std::map<std::string, sdk::ConfigValue> options;
  };
  // Narrow CISPO bounds and an asymmetric SAPO gate, so that every part of each objective acts.
  const std::vector<Case> cases{
      {"cispo", {{"cispo_epsilon_low", 0.1}, {"cispo_epsilon_high", 0.1}}},
      {"sapo", {{"sapo_tau_pos", 1.0}, {"sapo_tau_neg", 3.0}}},
  };
  for (const Case& c : cases) {
    for (const std::string loss_type : {"dapo", "grpo", "dr_grpo"}) {
      DYNAMIC_SECTION("policy_loss " << c.policy_loss << ", loss_type " << loss_type) {
        Fixture f(grpo_test::global_batch_prompts(), 52);
        const auto initial = f.policy->frozen_copy();
        auto overrides = c.options;
        overrides["policy_loss"] = c.policy_loss;
        overrides["loss_type"] = loss_type;
        overrides["num_iterations"] = int64_t{2};
        const sdk::ConfigValues values = grpo_test::grpo_values(overrides);
        Run run(f, values);
        dpo_test::run_step(run.module, run.context, f.pointers, {4, 0}, f.parameters, *f.communicator);
        grpo_test::perturb_parameters(*f.policy, 0.02);
        run.host.set_step(1, 0);

        grpo_test::ReferenceSpec spec;
        spec.policy_loss = c.policy_loss;
        spec.loss_type = loss_type;
        spec.cispo_epsilon_low = 0.1;
        spec.cispo_epsilon_high = 0.1;
        spec.sapo_tau_pos = 1.0;
        spec.sapo_tau_neg = 3.0;
        std::vector<at::Tensor> expected;
        const at::Tensor expected_loss = expected_gradient(f, spec, expected, initial.get());

        // The ratios reach past both CISPO bounds, none within rounding of one.
        std::vector<std::vector<double>> accuracy;
        for (const grpo_test::Prompt& prompt : f.prompts) {
          std::vector<double> group;
          for (const std::string& text : prompt.completions) group.push_back(text == prompt.answer ? 1.0 : 0.0);
          accuracy.push_back(group);
        }
        int64_t below = 0, above = 0;
        double margin = 1.0;
        for (const grpo_test::TokenRatio& token : grpo_test::reference_token_ratios(
                 *f.policy, *initial, f.prompts, grpo_test::reference_advantages(accuracy, "group"))) {
          below += token.ratio < 0.9;
          above += token.ratio > 1.1;
          margin = std::min({margin, std::abs(token.ratio - 0.9), std::abs(token.ratio - 1.1)});
        }
        INFO("ratios below 0.9: " << below << ", above 1.1: " << above << ", nearest bound " << margin);
        REQUIRE(below > 0);
        REQUIRE(above > 0);
        REQUIRE(margin > 1e-5);

        // Another objective gives another gradient: PPO's clip, or CISPO without its bounds / SAPO with one τ.
        for (const bool clip : {true, false}) {
          grpo_test::ReferenceSpec other = spec;
          if (clip) {
            other.policy_loss = "clip";
          } else {
            other.cispo_epsilon_low = 1.0;
            other.cispo_epsilon_high = 100.0;
            other.sapo_tau_neg = 1.0;
          }
          std::vector<at::Tensor> gradient;
          expected_gradient(f, other, gradient, initial.get());
          INFO((clip ? "clip" : "unbounded CISPO / symmetric SAPO"));
          CHECK(testing::relative_error(gradient, expected) > 1e-3);
        }
        check_second_update_every_split(f, run, expected_loss, expected);
        const dpo_test::StepOutcome again =
            dpo_test::run_step(run.module, run.context, {}, {4, 0}, f.parameters, *f.communicator);
        if (c.policy_loss == "cispo") {
          CHECK(again.metrics.at("clip_ratio/low_mean") > 0.0);
          CHECK(again.metrics.at("clip_ratio/high_mean") > 0.0);
        } else {
          CHECK(again.metrics.at("clip_ratio/region_mean") == 0.0);
        }
      }
    }
  }
}
