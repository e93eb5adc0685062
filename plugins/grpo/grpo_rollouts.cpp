#include "grpo_rollouts.h"

#include "ptrain/sdk/chat.h"
#include "ptrain/sdk/errors.h"
#include "ptrain/sdk/util/example_fields.h"
#include "ptrain/sdk/util/prompt_tokens.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

namespace ptrain::grpo {
namespace {

// What reward functions read of each rollout, in rollout order.
std::vector<sdk::RewardInput> reward_inputs(const sdk::Tokenizer& tokenizer,
                                            const std::vector<const sdk::Example*>& examples,
                                            const RolloutGroups& groups) {
  std::vector<sdk::RewardInput> inputs;
  for (size_t i = 0; i < groups.rollouts.size(); ++i) {
    const size_t prompt = i / static_cast<size_t>(groups.num_generations);
    const sdk::Rollout& rollout = groups.rollouts[i];
    inputs.push_back({examples[prompt], groups.prompt_texts[prompt], tokenizer.decode(rollout.completion_ids),
                      static_cast<int64_t>(rollout.completion_ids.size()), rollout.truncated()});
  }
  return inputs;
}

// One function's rewards of every input, checked: as many as inputs, all finite.
std::vector<double> checked_scores(sdk::RewardFunction& function, const std::string& name,
                                   const std::vector<sdk::RewardInput>& inputs) {
  const std::vector<double> scores = inputs.empty() ? std::vector<double>{} : function.score(inputs);
  if (scores.size() != inputs.size()) {
    throw sdk::PluginError("grpo: reward function '" + name + "' returned " + std::to_string(scores.size()) +
                           " scores for " + std::to_string(inputs.size()) + " completions");
  }
  for (size_t i = 0; i < scores.size(); ++i) {
    if (!std::isfinite(scores[i])) {
      throw sdk::PluginError("grpo: reward function '" + name + "' scored a completion of " +
                             inputs[i].example->location + " " + std::to_string(scores[i]) +
                             "; rewards must be finite");
    }
  }
  return scores;
}

}  // namespace

RolloutGroups generate_rollouts(sdk::Context& ctx, const GrpoConfig& config,
                                const std::vector<const sdk::Example*>& examples, int64_t first_generation_index,
                                sdk::Environment* environment) {
  const int64_t max_length = ctx.run_info().max_length;
  sdk::SamplingParams sampling = config.sampling;
  sampling.seed = ctx.run_info().seed;
  sampling.step = ctx.run_info().step;

  RolloutGroups groups;
  groups.num_generations = config.num_generations;
  groups.with_environment = environment != nullptr;
  for (const sdk::Example* example : examples) {
    std::string text;
    std::vector<int64_t> ids = sdk::prompt_token_ids(ctx.tokenizer(), *example, max_length, text);
    const int64_t room = std::min(config.max_completion_length, max_length - static_cast<int64_t>(ids.size()));
    for (int64_t k = 0; k < config.num_generations; ++k)
      groups.requests.push_back({ids, example->index, first_generation_index + k, room});
    groups.prompt_texts.push_back(std::move(text));
  }
  if (groups.requests.empty()) return groups;
  if (environment == nullptr) {
    groups.rollouts = ctx.rollout_engine().generate(groups.requests, sampling, config.generation_batch_size);
    return groups;
  }
  std::vector<const sdk::Example*> request_examples;
  for (const sdk::Example* example : examples)
    request_examples.insert(request_examples.end(), config.num_generations, example);
  groups.rollouts =
      run_episodes(ctx, *environment, config, request_examples, groups.requests, sampling, groups.episodes);
  return groups;
}

at::Tensor score_rollouts(const sdk::Tokenizer& tokenizer,
                          const std::vector<std::unique_ptr<sdk::RewardFunction>>& functions,
                          const std::vector<std::string>& names, const std::vector<const sdk::Example*>& examples,
                          const RolloutGroups& groups) {
  const auto num_prompts = static_cast<int64_t>(examples.size());
  const int64_t g = groups.num_generations;
  const auto num_functions = static_cast<int64_t>(functions.size());
  // A rank without prompts still has the environment's column, as every rank must.
  const int64_t num_columns = num_functions + (groups.with_environment ? 1 : 0);
  const std::vector<sdk::RewardInput> inputs = reward_inputs(tokenizer, examples, groups);
  at::Tensor rewards = at::zeros({num_prompts, g, num_columns}, at::kDouble);  // [P, G, F]
  for (int64_t f = 0; f < num_functions; ++f) {
    const std::vector<double> scores = checked_scores(*functions[f], names[f], inputs);
    if (!scores.empty()) rewards.select(2, f).copy_(at::tensor(scores, at::kDouble).view({num_prompts, g}));
  }
  if (!groups.episodes.empty()) {  // [P, G] of them, or none when P = 0
    std::vector<double> episode_rewards;
    for (const EpisodeOutcome& episode : groups.episodes) episode_rewards.push_back(episode.reward);
    rewards.select(2, num_functions).copy_(at::tensor(episode_rewards, at::kDouble).view({num_prompts, g}));
  }
  return rewards;
}

}  // namespace ptrain::grpo
