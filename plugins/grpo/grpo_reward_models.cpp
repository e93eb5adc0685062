#include "grpo_reward_models.h"

#include "ptrain/sdk/chat.h"
#include "ptrain/sdk/errors.h"
#include "ptrain/sdk/util/example_fields.h"

#include <algorithm>

namespace ptrain::grpo {
namespace {

class RewardModelReward final : public sdk::RewardFunction {
 public:
  RewardModelReward(std::unique_ptr<sdk::RewardModel> model, std::string name, int64_t batch_size)
      : model_(std::move(model)), name_(std::move(name)), batch_size_(batch_size) {}

  std::string name() const override { return name_; }

  std::vector<double> score(const std::vector<sdk::RewardInput>& inputs) override {
    std::vector<std::vector<int64_t>> sequences;
    sequences.reserve(inputs.size());
    for (const sdk::RewardInput& input : inputs) sequences.push_back(reward_model_input(model_->tokenizer(), input));
    const size_t chunk = batch_size_ > 0 ? static_cast<size_t>(batch_size_) : std::max<size_t>(1, sequences.size());
    std::vector<double> scores;
    scores.reserve(sequences.size());
    for (size_t begin = 0; begin < sequences.size(); begin += chunk) {
      const size_t end = std::min(sequences.size(), begin + chunk);
      const std::vector<double> part =
          model_->score(std::vector<std::vector<int64_t>>(sequences.begin() + begin, sequences.begin() + end));
      scores.insert(scores.end(), part.begin(), part.end());
    }
    return scores;
  }

 private:
  std::unique_ptr<sdk::RewardModel> model_;
  std::string name_;
  int64_t batch_size_;
};

// The prompt as chat turns: the example's messages, or its prompt text as the user's turn.
std::vector<sdk::ChatMessage> prompt_messages(const sdk::Example& example) {
  if (sdk::has_field(example, "messages")) return sdk::read_messages(example);
  return {{"user", sdk::require_string(example, "prompt")}};
}

}  // namespace

std::string reward_model_name(const std::string& model_dir) {
  const size_t end = model_dir.find_last_not_of('/');
  if (end == std::string::npos) return "";  // empty, or slashes only: no name
  const size_t slash = model_dir.rfind('/', end);
  return model_dir.substr(slash == std::string::npos ? 0 : slash + 1,
                          slash == std::string::npos ? end + 1 : end - slash);
}

std::vector<int64_t> reward_model_input(const sdk::Tokenizer& tokenizer, const sdk::RewardInput& input) {
  std::vector<sdk::ChatMessage> messages = prompt_messages(*input.example);
  messages.push_back({"assistant", input.completion});
  const sdk::ChatTemplate* chat = tokenizer.chat_template();
  if (chat == nullptr) throw sdk::PluginError("reward model tokenizer without a chat template");
  return sdk::tokenize_chat(tokenizer, chat->render(messages, false, input.example->location)).ids;
}

std::unique_ptr<sdk::RewardFunction> make_reward_model_reward(std::unique_ptr<sdk::RewardModel> model, std::string name,
                                                              int64_t batch_size) {
  return std::make_unique<RewardModelReward>(std::move(model), std::move(name), batch_size);
}

std::vector<std::unique_ptr<sdk::RewardFunction>> make_reward_model_rewards(sdk::Context& ctx,
                                                                            const std::vector<std::string>& model_dirs,
                                                                            int64_t batch_size) {
  const std::string where = ctx.module_config().where("reward_models") + ": ";
  std::vector<std::unique_ptr<sdk::RewardFunction>> rewards;
  for (const std::string& dir : model_dirs) {
    std::unique_ptr<sdk::RewardModel> model;
    try {
      model = ctx.load_reward_model(dir);
    } catch (const sdk::ModelError& error) {
      throw sdk::ModelError(where + error.what());
    } catch (const sdk::ConfigError& error) {
      throw sdk::ConfigError(where + error.what());
    }
    rewards.push_back(make_reward_model_reward(std::move(model), reward_model_name(dir), batch_size));
  }
  return rewards;
}

}  // namespace ptrain::grpo
