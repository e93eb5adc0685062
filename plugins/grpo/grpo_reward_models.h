// reward_models: Hugging Face sequence-classification models as GRPO
// rewards. Each completion is scored as a conversation rendered with the
// reward model's own chat template and tokenized with its own tokenizer:
//   the example's messages (or its prompt as one user turn), then the
//   completion as the assistant's turn
// and the model's score of that sequence (sdk/reward_model.h) is the
// reward, named after the model's directory (rewards/<basename>/mean).
#pragma once

#include "ptrain/sdk/context.h"
#include "ptrain/sdk/reward_model.h"
#include "ptrain/sdk/rewards.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ptrain::grpo {

// The reward's name: the directory's last component ("models/rm/" → "rm").
std::string reward_model_name(const std::string& model_dir);

// The ids a reward model scores for one completion: the conversation
// rendered by `tokenizer`'s chat template (which must be set), without a
// generation prompt, then tokenized.
std::vector<int64_t> reward_model_input(const sdk::Tokenizer& tokenizer, const sdk::RewardInput& input);

// A reward function that scores with `model`, `batch_size` sequences per
// forward pass (0: all the inputs of one call at once).
std::unique_ptr<sdk::RewardFunction> make_reward_model_reward(std::unique_ptr<sdk::RewardModel> model, std::string name,
                                                              int64_t batch_size);

// The reward model of each directory, loaded by the core
// (Context::load_reward_model), its errors prefixed with module.reward_models' location.
std::vector<std::unique_ptr<sdk::RewardFunction>> make_reward_model_rewards(sdk::Context& ctx,
                                                                            const std::vector<std::string>& model_dirs,
                                                                            int64_t batch_size);

}  // namespace ptrain::grpo
