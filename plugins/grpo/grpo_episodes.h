// Multi-turn rollouts: episodes with an environment (sdk/environment.h).
//
// Each rollout request starts an episode from its prompt's example. Turn t
// samples one assistant turn from the policy, given the episode so far as
// its prompt (RolloutRequest::turn = t, so each turn draws from its own
// seed); the turn ends at the chat template's end-of-turn marker or <eos>.
// The environment then answers with an observation, appended as its own chat
// turn — the template's rendering from the end of the assistant turn to the
// next assistant prefix — or ends the episode with a reward. Episodes end
// after max_turns assistant turns, when a turn reaches the token limit, or
// when an observation does not fit: then the reward is the episode's
// unfinished_reward(). The whole episode after the prompt (assistant turns
// and observations) fits in max_completion_length tokens and data.max_length.
//
// Only the policy's own tokens (each assistant turn with its end-of-turn
// marker) are trained and count as loss units; the observations and the
// template text around them are context (policy_mask 0).
#pragma once

#include "grpo_config.h"

#include "ptrain/sdk/chat.h"
#include "ptrain/sdk/context.h"
#include "ptrain/sdk/environment.h"
#include "ptrain/sdk/generation.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ptrain::grpo {

// What an episode adds to its rollout beyond the tokens.
struct EpisodeOutcome {
  std::vector<uint8_t> policy_mask;   // one per completion token: 1 where the policy sampled it
  double reward = 0.0;                // the environment's (finite)
  int64_t turns = 0;                  // assistant turns taken
  bool ended_by_environment = false;  // false: cut (turn limit, token limit, no room for an observation)
};

// How an assistant turn ends in a chat template: the text after its content
// (e.g. "<|im_end|>"; empty for "plain") and whether <eos> is part of it.
struct EndOfTurn {
  std::string text;
  bool eos = false;
};

// Read from the template's rendering of a probe conversation.
EndOfTurn end_of_turn(const sdk::ChatTemplate& chat);

// The tokens between the end of an assistant turn and the next assistant
// prefix when `observation` follows as a `role` turn, as the template renders
// them. Throws sdk::DataError naming `location` for a role the template refuses.
std::vector<int64_t> observation_ids(const sdk::Tokenizer& tokenizer, const sdk::ChatTemplate& chat,
                                     const std::string& observation, const std::string& role,
                                     const std::string& location);

// Runs one episode per request (examples[i] is request i's example; its
// max_new_tokens is the episode's room, of which a turn takes at most
// sampling.max_new_tokens) and
// returns each one's rollout: its completion_ids are the episode after the
// prompt, its stop reason the last turn's (kLength when an observation did
// not fit). `outcomes` receives their masks, rewards and turns. Throws
// sdk::ConfigError when the tokenizer has no chat template, sdk::PluginError
// naming the environment and the example for a reward that is not finite.
std::vector<sdk::Rollout> run_episodes(sdk::Context& ctx, sdk::Environment& environment, const GrpoConfig& config,
                                       const std::vector<const sdk::Example*>& examples,
                                       const std::vector<sdk::RolloutRequest>& requests,
                                       const sdk::SamplingParams& sampling, std::vector<EpisodeOutcome>& outcomes);

}  // namespace ptrain::grpo
