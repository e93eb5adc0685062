// GRPO with a multi-turn environment (grpo_episodes.h): scripted episodes
// through the episode loop (masks, the turn limit, the environment's end,
// truncation, the room for observations), then the step gradient of fixed
// episodes against an independent full-batch reference for every microbatch
// split, and the calculator example's tool.
#include "catch.h"

#include "dpo_test_support.h"
#include "grpo_episode_support.h"
#include "grpo_test_support.h"

#include "calculator.h"
#include "core/plugin/host_context.h"
#include "grpo_episodes.h"
#include "grpo_module.h"
#include "grpo_rollouts.h"
#include "ptrain/sdk/util/prompt_tokens.h"

#include <ATen/ATen.h>

namespace {

using namespace ptrain;
using grpo_test::ExpectedEpisode;

constexpr int64_t kMaxLength = 64;  // the tiny model's positions
constexpr int64_t kMaxTurns = 3;

// Two prompts × three episodes: ended by the environment at once, after an
// observation, cut at the turn limit; and a wrong answer, a right one, a
// truncated first turn.
std::vector<grpo_test::Prompt> episode_prompts() { return {{"1+1=", "2", {}}, {"7*6=", "42", {}}}; }
std::vector<std::vector<std::vector<std::string>>> episode_script() {
  return {{{"2"}, {"?a", "2"}, {"?b", "?c", "?d", "never sampled"}}, {{"?x", "41"}, {"42"}, {"?long…"}}};
}
// The environment's rewards of those episodes, by the rules of ScriptedEnvironment.
std::vector<std::vector<double>> episode_rewards() {
  return {{1.0, 1.0, grpo_test::kUnfinishedReward}, {0.0, 1.0, grpo_test::kUnfinishedReward}};
}

sdk::ConfigValues environment_values(const std::string& loss_type) {
  sdk::ConfigValues values = grpo_test::grpo_values({{"loss_type", loss_type},
                                                     {"max_completion_length", int64_t{56}},
                                                     {"environment", std::string("scripted")},
                                                     {"max_turns", kMaxTurns}});
  values.set("reward_funcs", std::vector<std::string>{}, "test.toml:1", true);
  return values;
}

// One process's run of the scripted episodes: a tiny random policy, a byte
// tokenizer with the plain template, the [module] of environment_values.
struct Setup {
  std::unique_ptr<model::CausalLm> policy;
  tokenizer::ByteTokenizer tokenizer;
  std::vector<grpo_test::Prompt> prompts = episode_prompts();
  std::vector<sdk::Example> examples = grpo_test::to_examples(prompts);
  std::vector<const sdk::Example*> pointers = dpo_test::pointers_to(examples);
  std::unique_ptr<dist::Communicator> communicator = dist::make_single_process_communicator();
  sdk::ConfigValues values;
  std::unique_ptr<plugin::HostContext> host;

  Setup(uint64_t model_seed, const std::string& loss_type, uint64_t run_seed = 0)
      : policy(model::CausalLm::init_random(testing::tiny_model_config(), model_seed)),
        values(environment_values(loss_type)) {
    tokenizer.set_chat_template(sdk::ChatTemplate::named("plain"));
    host = std::make_unique<plugin::HostContext>(*policy, tokenizer, values, *communicator,
                                                 sdk::RunInfo{run_seed, kMaxLength, 0, 0, ""});
  }
};

// The step loss of the fixed episodes from the formulas: advantages of the
// environment's rewards within each group, and −A·π/sg(π) summed over the
// policy's tokens only (each episode alone and unpadded through
// model.logits), divided by the policy tokens (dapo) or averaged per episode
// (grpo).
at::Tensor reference_episode_loss(model::CausalLm& policy, const std::vector<grpo_test::Prompt>& prompts,
                                  const std::string& loss_type) {
  const std::vector<std::vector<double>> advantages = grpo_test::reference_advantages(episode_rewards(), "group");
  const auto script = episode_script();
  at::Tensor token_sum = at::zeros({}, at::kDouble);
  at::Tensor sequence_sum = at::zeros({}, at::kDouble);
  int64_t tokens = 0;
  for (size_t p = 0; p < prompts.size(); ++p) {
    for (size_t k = 0; k < script[p].size(); ++k) {
      const ExpectedEpisode episode = grpo_test::expected_episode(script[p][k], kMaxTurns);
      const at::Tensor log_probs = grpo_test::reference_token_log_probs(policy, prompts[p].prompt, episode.ids);
      const at::Tensor mask = at::tensor(std::vector<uint8_t>(episode.policy), at::kByte).to(at::kDouble);
      const at::Tensor loss = -at::exp(log_probs - log_probs.detach()) * advantages[p][k] * mask;
      token_sum = token_sum + loss.sum();
      sequence_sum = sequence_sum + loss.sum() / mask.sum();
      tokens += static_cast<int64_t>(mask.sum().item<double>());
    }
  }
  if (loss_type == "grpo") return sequence_sum / 6.0;
  return token_sum / static_cast<double>(tokens);
}

}  // namespace

TEST_CASE("episodes: observations are context, turns end by the environment, the turn limit or truncation",
          "[grpo][environment]") {
  Setup setup(31, "dapo");
  grpo_test::ScriptedTurnEngine engine(episode_script());
  grpo_test::ScriptedEnvironment environment;
  grpo_test::InjectedContext context(*setup.host, engine, &environment);
  const grpo::GrpoConfig config = grpo::read_grpo_config(setup.values);
  REQUIRE(config.reward_names == std::vector<std::string>{"environment"});

  SECTION("the plain template ends a turn with <eos> and renders an observation as a user turn") {
    const grpo::EndOfTurn end = grpo::end_of_turn(sdk::ChatTemplate::named("plain"));
    CHECK(end.eos);
    CHECK(end.text.empty());
    const grpo::EndOfTurn chatml = grpo::end_of_turn(sdk::ChatTemplate::named("chatml"));
    CHECK(chatml.text == "<|im_end|>");
    const std::vector<int64_t> ids =
        grpo::observation_ids(setup.tokenizer, sdk::ChatTemplate::named("chatml"), "5", "user", "probe");
    CHECK(setup.tokenizer.decode(ids) == "\n<|im_start|>user\n5<|im_end|>\n<|im_start|>assistant\n");
  }

  SECTION("each episode's tokens, policy mask, turns and reward") {
    grpo::GrpoConfig run = config;
    std::vector<const sdk::Example*> per_request;
    std::vector<sdk::RolloutRequest> requests;
    for (const sdk::Example& example : setup.examples) {
      for (int64_t k = 0; k < 3; ++k) {
        per_request.push_back(&example);
        std::string text;
        requests.push_back({sdk::prompt_token_ids(context.tokenizer(), example, context.run_info().max_length, text), example.index, k, 56});
      }
    }
    std::vector<grpo::EpisodeOutcome> outcomes;
    const std::vector<sdk::Rollout> rollouts =
        grpo::run_episodes(context, environment, run, per_request, requests, run.sampling, outcomes);
    REQUIRE(rollouts.size() == 6);
    const auto script = episode_script();
    const std::vector<std::vector<double>> rewards = episode_rewards();
    for (size_t i = 0; i < rollouts.size(); ++i) {
      INFO("episode " << i);
      const ExpectedEpisode expected = grpo_test::expected_episode(script[i / 3][i % 3], kMaxTurns);
      CHECK(rollouts[i].completion_ids == expected.ids);
      CHECK(outcomes[i].policy_mask == expected.policy);
      CHECK(outcomes[i].turns == expected.turns);
      CHECK(outcomes[i].reward == rewards[i / 3][i % 3]);
    }
    CHECK(outcomes[2].turns == kMaxTurns);  // cut at the limit: its 4th turn is never asked for
    CHECK_FALSE(outcomes[2].ended_by_environment);
    CHECK(outcomes[1].ended_by_environment);
    CHECK(rollouts[5].truncated());
    CHECK(engine.calls == 3);  // one batched generation per turn
    // Turn t's request: the prompt and the episode so far, turn t, the room left.
    int turn_two_requests = 0;
    for (const sdk::RolloutRequest& request : engine.requests_seen) {
      if (request.prompt_index == 0 && request.generation_index == 2 && request.turn == 2) {
        ++turn_two_requests;
        const ExpectedEpisode two_turns = grpo_test::expected_episode({"?b", "?c"}, kMaxTurns);  // and observations
        CHECK(request.prompt_ids.size() == 5 + two_turns.ids.size());
        CHECK(request.max_new_tokens == 56 - static_cast<int64_t>(two_turns.ids.size()));
      }
    }
    CHECK(turn_two_requests == 1);
    // The environment read each turn without its <eos>, turn by turn, the one at the limit flagged last,
    // never the truncated one.
    const std::vector<std::string> expected_texts{"2", "?a", "?b", "?x", "42", "2", "?c", "41", "?d"};
    REQUIRE(environment.turns_seen.size() == expected_texts.size());
    for (size_t i = 0; i < expected_texts.size(); ++i) {
      CHECK(environment.turns_seen[i].text == expected_texts[i]);
      CHECK(environment.turns_seen[i].turn_index == (i < 5 ? 0 : i < 8 ? 1 : 2));
      CHECK(environment.turns_seen[i].last == (i == 8));
    }
  }

  SECTION("an observation that does not fit ends the episode as truncated") {
    std::string text;
    const sdk::RolloutRequest request{sdk::prompt_token_ids(context.tokenizer(), setup.examples[0], context.run_info().max_length, text), 0, 2, 25};
    std::vector<grpo::EpisodeOutcome> outcomes;
    const std::vector<sdk::Rollout> rollouts =
        grpo::run_episodes(context, environment, config, {&setup.examples[0]}, {request}, config.sampling, outcomes);
    // "?b<eos>" (3) + the observation turn (19) fit in 25 with a token to spare; after "?c<eos>" none does.
    CHECK(outcomes[0].turns == 2);
    CHECK(outcomes[0].reward == grpo_test::kUnfinishedReward);
    CHECK(rollouts[0].truncated());
    CHECK(rollouts[0].completion_ids.size() == 3 + 19 + 3);
  }
}

TEST_CASE("episodes: the step gradient equals the full-batch reference over the policy's tokens for every split",
          "[grpo][environment][invariance]") {
  for (const std::string loss_type : {"dapo", "grpo"}) {
    DYNAMIC_SECTION("loss_type " << loss_type) {
      Setup setup(32, loss_type);
      const std::vector<at::Tensor> parameters = dpo_test::parameters_of(*setup.policy);
      grpo_test::ScriptedTurnEngine engine(episode_script());
      grpo_test::ScriptedEnvironment environment;
      grpo_test::InjectedContext context(*setup.host, engine, &environment);
      grpo::GrpoModule module;
      module.setup(context);

      dpo_test::clear_gradients(parameters);
      const at::Tensor expected_loss = reference_episode_loss(*setup.policy, setup.prompts, loss_type);
      expected_loss.backward();
      const std::vector<at::Tensor> expected = dpo_test::gradients_of(parameters);

      for (const int64_t micro_size : {1, 2, 4, 6}) {
        INFO("micro_size " << micro_size);
        const dpo_test::StepOutcome outcome =
            dpo_test::run_step(module, context, setup.pointers, {micro_size, 0}, parameters, *setup.communicator);
        REQUIRE(outcome.gradient.has_units);
        const double error = testing::relative_error(outcome.grads, expected);
        INFO("relative gradient error " << error);
        CHECK(error <= 1e-5);
        CHECK(outcome.metrics.at("core/loss") == Approx(expected_loss.item<double>()).epsilon(1e-5).margin(1e-9));
        CHECK(outcome.metrics.at("rewards/environment/mean") == Approx(2.0 / 6.0));
        CHECK(outcome.metrics.at("episodes/turns") == Approx((1 + 2 + 3 + 2 + 1 + 1) / 6.0));
      }

      // The loss mask is the policy mask: observations carry no loss unit.
      int64_t units = 0;
      int64_t policy_tokens = 0;
      const auto script = episode_script();
      for (size_t p = 0; p < 2; ++p) {
        for (size_t k = 0; k < 3; ++k) {
          for (const uint8_t bit : grpo_test::expected_episode(script[p][k], kMaxTurns).policy) policy_tokens += bit;
        }
      }
      for (const auto& microbatch : module.prepare(context, setup.pointers, {6, 0})) {
        const auto& batch = static_cast<const grpo::GrpoMicrobatch&>(*microbatch);
        units += module.count_units(batch)[0];
        CHECK(batch.tokens.loss_mask.sum().item<int64_t>() == policy_tokens);
        for (int64_t row = 0; row < 6; ++row) {
          const grpo::ScoredCompletion& completion = module.completions()[static_cast<size_t>(row)];
          const at::Tensor mask =
              batch.tokens.loss_mask[row].narrow(0, static_cast<int64_t>(completion.prompt_ids.size()) - 1,
                                                 static_cast<int64_t>(completion.completion_ids.size()));
          const ExpectedEpisode episode = grpo_test::expected_episode(script[row / 3][row % 3], kMaxTurns);
          CHECK(at::equal(mask, at::tensor(std::vector<uint8_t>(episode.policy), at::kByte).to(at::kBool)));
        }
      }
      CHECK(units == (loss_type == "dapo" ? policy_tokens : 6));
    }
  }
}

TEST_CASE("episodes sampled by the core's engine are the same whatever the generation batch", "[grpo][environment]") {
  Setup setup(33, "dapo", 7);
  grpo::GrpoConfig config = grpo::read_grpo_config(setup.values);
  // A random model seldom samples <eos>: any letter ends a turn instead, so
  // turns are short and episodes take several.
  for (char letter = 'a'; letter <= 'z'; ++letter) config.sampling.stop_strings.emplace_back(1, letter);
  std::vector<grpo::RolloutGroups> runs;
  for (const int64_t batch : {0, 1}) {
    config.generation_batch_size = batch;
    grpo_test::ScriptedEnvironment environment(true);
    runs.push_back(grpo::generate_rollouts(*setup.host, config, setup.pointers, 0, &environment));
  }
  REQUIRE(runs[0].episodes.size() == 6);
  int64_t longest = 0;
  const std::string observation = grpo_test::kObservationTurn;
  for (size_t i = 0; i < 6; ++i) {
    const grpo::EpisodeOutcome& episode = runs[0].episodes[i];
    const std::vector<int64_t>& ids = runs[0].rollouts[i].completion_ids;
    CHECK(ids == runs[1].rollouts[i].completion_ids);
    CHECK(episode.policy_mask == runs[1].episodes[i].policy_mask);
    REQUIRE(episode.policy_mask.size() == ids.size());
    longest = std::max(longest, episode.turns);
    // Every context span is the rendered observation turn.
    std::string context;
    for (size_t t = 0; t < ids.size(); ++t) {
      if (episode.policy_mask[t] == 0) context.push_back(static_cast<char>(ids[t]));
    }
    std::string expected;
    for (int64_t turn = 1; turn < episode.turns; ++turn) expected += observation;
    CHECK(context == expected);
  }
  CHECK(longest == kMaxTurns);

  // A rank with no prompt still scores into the environment's column (every rank's [P, G, F] alike).
  grpo_test::ScriptedEnvironment environment(true);
  const grpo::RolloutGroups none = grpo::generate_rollouts(*setup.host, config, {}, 0, &environment);
  const at::Tensor rewards = grpo::score_rollouts(setup.tokenizer, {}, {}, {}, none);
  CHECK(rewards.sizes() == at::IntArrayRef({0, 3, 1}));
}

TEST_CASE("the calculator example's tool: expressions, calls and errors", "[grpo][environment]") {
  std::string error;
  CHECK(examples::evaluate_expression("2+3*4", error) == 14);
  CHECK(examples::evaluate_expression(" (2+3) * 4 ", error) == 20);
  CHECK(examples::evaluate_expression("-7/2", error) == -3);
  CHECK(examples::evaluate_expression("10-2-3", error) == 5);
  CHECK_FALSE(examples::evaluate_expression("1/0", error));
  CHECK(error == "division by zero");
  error.clear();
  CHECK_FALSE(examples::evaluate_expression("2+", error));
  CHECK(error == "expression ends early");
  error.clear();
  CHECK_FALSE(examples::evaluate_expression("(1", error));
  CHECK(error == "missing ')'");
  error.clear();
  CHECK_FALSE(examples::evaluate_expression("1000000000*1000000000", error));
  CHECK(error == "result out of range");
  CHECK(examples::calculator_call("let me see <calc>12*3</calc>") == std::optional<std::string>("12*3"));
  CHECK_FALSE(examples::calculator_call("36"));
}

TEST_CASE("a later turn draws from its own seed, and turn 0 keeps the single-turn seed", "[grpo][environment]") {
  CHECK(sdk::rollout_seed(5, 2, 7, 1, 0) == sdk::rollout_seed(5, 2, 7, 1));
  CHECK(sdk::rollout_seed(5, 2, 7, 1, 1) != sdk::rollout_seed(5, 2, 7, 1));
  CHECK(sdk::rollout_seed(5, 2, 7, 1, 1) != sdk::rollout_seed(5, 2, 7, 1, 2));
}
