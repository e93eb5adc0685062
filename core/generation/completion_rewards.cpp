#include "core/generation/completion_rewards.h"

#include "core/rewards/reward_batch.h"
#include "core/rewards/reward_spec.h"
#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <optional>

namespace ptrain::generation {
namespace {

NamedReward make_reward(const std::string& entry, const sdk::BuiltinRewardSettings& settings) {
  if (const std::optional<sdk::RewardSource> source = sdk::reward_source_of(entry)) {
    if (entry.rfind("python:", 0) == 0 && source->function.empty()) {
      throw sdk::ConfigError("'" + entry + "': expected python:FILE.py:FUNCTION");
    }
    return {source->metric_name, rewards::open_reward_source(source->source)->create(source->function)};
  }
  return {entry, sdk::make_builtin_reward(entry, settings)};
}

}  // namespace

std::string reward_name(const std::string& entry) {
  const std::optional<sdk::RewardSource> source = sdk::reward_source_of(entry);
  return source ? source->metric_name : entry;
}

std::string resolve_answer_field(const std::string& given, const std::vector<std::string>& rewards,
                                 const std::vector<sdk::Example>& prompts, const std::string& option) {
  const bool needed = std::any_of(rewards.begin(), rewards.end(),
                                  [](const std::string& name) { return name == "accuracy" || name == "closeness"; });
  auto lacking = [&](const std::string& field) {
    return std::find_if(prompts.begin(), prompts.end(),
                        [&](const sdk::Example& prompt) { return !prompt.fields.contains(field); });
  };
  std::string field = given.empty() ? "answer" : given;
  if (given.empty() && lacking("answer") != prompts.end() && lacking("completion") == prompts.end()) {
    field = "completion";
  }
  const auto first_lacking = lacking(field);
  if (needed && first_lacking != prompts.end()) {
    throw sdk::DataError(first_lacking->location + ": no field '" + field +
                         "', which the accuracy and closeness rewards compare with (" + option + " names another)");
  }
  return field;
}

std::vector<NamedReward> make_rewards(const std::vector<std::string>& entries, const sdk::BuiltinRewardSettings& settings,
                                      const std::string& option) {
  std::vector<NamedReward> made;
  for (const std::string& entry : entries) {
    try {
      made.push_back(make_reward(entry, settings));
    } catch (const sdk::ConfigError& error) {
      throw sdk::ConfigError(option + " " + entry + ": " + error.what());
    }
    for (size_t other = 0; other + 1 < made.size(); ++other) {
      if (made[other].name == made.back().name) {
        throw sdk::ConfigError(option + " " + entry + ": a second reward named '" + made.back().name + "'");
      }
    }
  }
  return made;
}

at::Tensor score_completions(std::vector<NamedReward>& rewards, const std::vector<Completion>& completions,
                             const std::vector<sdk::Example>& prompts, const sdk::Tokenizer& tokenizer,
                             dist::Communicator& communicator, at::Device device) {
  std::vector<size_t> own;
  std::vector<sdk::RewardInput> inputs;
  for (size_t i = 0; i < completions.size(); ++i) {
    const Completion& completion = completions[i];
    if (completion.prompt % communicator.world_size() != communicator.rank()) continue;
    own.push_back(i);
    inputs.push_back({&prompts[static_cast<size_t>(completion.prompt)], completion.prompt_text,
                      tokenizer.decode(completion.completion_ids),
                      static_cast<int64_t>(completion.completion_ids.size()),
                      completion.stop_reason == sdk::StopReason::kLength});
  }
  const auto columns = static_cast<int64_t>(rewards.size());
  at::Tensor scores = at::zeros({static_cast<int64_t>(completions.size()), columns}, at::kDouble);
  auto table = scores.accessor<double, 2>();
  for (int64_t f = 0; f < columns; ++f) {
    NamedReward& reward = rewards[static_cast<size_t>(f)];
    const std::vector<double> values = inputs.empty() ? std::vector<double>{} : reward.function->score(inputs);
    rewards::check_reward_scores(reward.name, values, inputs);
    for (size_t k = 0; k < own.size(); ++k) table[static_cast<int64_t>(own[k])][f] = values[k];
  }
  std::vector<at::Tensor> gathered{scores.to(device)};
  communicator.all_reduce_sum(gathered);
  return gathered[0].cpu();
}

std::vector<double> reward_means(const at::Tensor& scores) {
  const at::Tensor host = scores.cpu().contiguous();
  const int64_t rows = host.size(0);
  const int64_t columns = host.size(1);
  std::vector<double> means(static_cast<size_t>(columns), 0.0);
  const double* values = host.data_ptr<double>();
  for (int64_t f = 0; f < columns; ++f) {
    double sum = 0.0;
    for (int64_t i = 0; i < rows; ++i) sum += values[i * columns + f];
    means[static_cast<size_t>(f)] = rows == 0 ? 0.0 : sum / static_cast<double>(rows);
  }
  return means;
}

}  // namespace ptrain::generation
