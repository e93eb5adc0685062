#include "core/rewards/reward_batch.h"

#include "ptrain/sdk/errors.h"

#include <cmath>
#include <set>

namespace ptrain::rewards {

nlohmann::json reward_batch_json(const std::vector<sdk::RewardInput>& inputs) {
  nlohmann::json batch = {{"prompts", nlohmann::json::array()},
                          {"completions", nlohmann::json::array()},
                          {"completion_tokens", nlohmann::json::array()},
                          {"truncated", nlohmann::json::array()}};
  std::set<std::string> fields;
  for (const sdk::RewardInput& input : inputs) {
    if (input.example == nullptr || !input.example->fields.is_object()) continue;
    for (const auto& field : input.example->fields.items()) {
      if (!batch.contains(field.key())) fields.insert(field.key());
    }
  }
  for (const std::string& field : fields) batch[field] = nlohmann::json::array();
  for (const sdk::RewardInput& input : inputs) {
    batch["prompts"].push_back(input.prompt);
    batch["completions"].push_back(input.completion);
    batch["completion_tokens"].push_back(input.completion_tokens);
    batch["truncated"].push_back(input.truncated);
    const bool has_fields = input.example != nullptr && input.example->fields.is_object();
    for (const std::string& field : fields) {
      const bool present = has_fields && input.example->fields.contains(field);
      batch[field].push_back(present ? input.example->fields.at(field) : nlohmann::json());
    }
  }
  return batch;
}

std::string reward_batch_text(const std::vector<sdk::RewardInput>& inputs) {
  return reward_batch_json(inputs).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void check_reward_scores(const std::string& function, const std::vector<double>& scores,
                         const std::vector<sdk::RewardInput>& inputs) {
  if (scores.size() != inputs.size()) {
    throw sdk::PluginError("reward function " + function + " returned " + std::to_string(scores.size()) +
                           " scores for " + std::to_string(inputs.size()) + " completions");
  }
  for (size_t i = 0; i < scores.size(); ++i) {
    if (std::isfinite(scores[i])) continue;
    const std::string where = inputs[i].example != nullptr ? " (" + inputs[i].example->location + ")" : "";
    throw sdk::PluginError("reward function " + function + " returned " + std::to_string(scores[i]) +
                           " for completion #" + std::to_string(i + 1) + where + "; rewards must be finite");
  }
}

}  // namespace ptrain::rewards
