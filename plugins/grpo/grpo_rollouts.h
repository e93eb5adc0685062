// A generation step's rollouts: the G completions the policy samples for
// each of a rank's prompts, and their scores by every reward function.
#pragma once

#include "grpo_config.h"
#include "grpo_episodes.h"

#include "ptrain/sdk/context.h"
#include "ptrain/sdk/environment.h"
#include "ptrain/sdk/generation.h"
#include "ptrain/sdk/rewards.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ptrain::grpo {

// Rollout i completes prompt i / G (prompt-major, G = num_generations).
struct RolloutGroups {
  int64_t num_generations = 0;  // G
  std::vector<sdk::RolloutRequest> requests;
  std::vector<sdk::Rollout> rollouts;
  std::vector<std::string> prompt_texts;  // one per prompt
  bool with_environment = false;          // rollouts are episodes (grpo_episodes.h), scored with its reward
  std::vector<EpisodeOutcome> episodes;   // one per rollout with an environment; else empty
};

// Samples G completions of every prompt at once, each within the prompt's
// room under data.max_length and max_completion_length. Their generation
// indices (which seed each sequence) start at first_generation_index: a
// refill round (grpo_dynamic_sampling.h) draws anew for a prompt met again.
// With an environment each rollout is an episode (grpo_episodes.h).
RolloutGroups generate_rollouts(sdk::Context& ctx, const GrpoConfig& config,
                                const std::vector<const sdk::Example*>& examples, int64_t first_generation_index = 0,
                                sdk::Environment* environment = nullptr);

// [P, G, F] float64: function f's reward of completion k of prompt p
// (`names`: the functions' configured names, for errors); with episodes,
// one column more, the last: the environment's reward. Throws
// sdk::PluginError naming the function when it returns too few or too many
// scores, or one that is not finite.
at::Tensor score_rollouts(const sdk::Tokenizer& tokenizer,
                          const std::vector<std::unique_ptr<sdk::RewardFunction>>& functions,
                          const std::vector<std::string>& names, const std::vector<const sdk::Example*>& examples,
                          const RolloutGroups& groups);

}  // namespace ptrain::grpo
