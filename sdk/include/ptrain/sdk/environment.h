// Multi-turn environments for online RL (GRPO's `environment`): the policy
// talks with an environment for up to max_turns assistant turns, and the
// environment ends the episode with a reward.
//
// An environment starts one episode per rollout from the prompt's dataset
// example; after each assistant turn the episode either answers with an
// observation (a tool result, a message: the next user or tool turn of the
// chat) or ends with a reward. Environments come from environment libraries
// (sdk/environment_plugin.h), which a plugin opens through
// Context::open_environment; the core loads them with the checks of every
// library it opens. docs/grpo.md shows the loop and the calculator example.
#pragma once

#include "ptrain/sdk/batch.h"

#include <cstdint>
#include <memory>
#include <string>

namespace ptrain::sdk {

// One assistant turn, as the episode reads it.
struct AssistantTurn {
  std::string text;        // the turn's text: special tokens and its end-of-turn marker dropped
  int64_t turn_index = 0;  // 0 for the first assistant turn
  bool last = false;       // max_turns reached: an observation now leaves the episode unfinished
};

// What an episode answers after an assistant turn.
struct EnvironmentReply {
  bool done = false;          // true: the episode ends here with `reward`
  double reward = 0.0;        // done only; must be finite
  std::string observation;    // !done: the content of the next turn, which the policy reads but never trains on
  std::string role = "user";  // !done: that turn's role in the chat template ("user", or "tool" where it has one)

  static EnvironmentReply observe(std::string text, std::string role = "user") {
    EnvironmentReply reply;
    reply.observation = std::move(text);
    reply.role = std::move(role);
    return reply;
  }
  static EnvironmentReply finish(double reward) {
    EnvironmentReply reply;
    reply.done = true;
    reply.reward = reward;
    return reply;
  }
};

// One rollout's conversation with the environment. Calls come from one
// thread, one episode after another's turn; episodes of one environment may
// be interleaved (the host steps every live episode once per turn).
class Episode {
 public:
  virtual ~Episode() = default;
  // After each assistant turn. Throws sdk::DataError naming the example when
  // its fields are unusable.
  virtual EnvironmentReply step(const AssistantTurn& turn) = 0;
  // The reward of an episode that ended before the environment ended it: the
  // last turn's reply was an observation, a turn reached the token limit
  // without its end-of-turn marker, or the next observation did not fit.
  virtual double unfinished_reward() { return 0.0; }
};

class Environment {
 public:
  virtual ~Environment() = default;
  // The name metrics and logs use.
  virtual std::string name() const = 0;
  // A new episode for one rollout of `example` (its dataset line: "prompt"
  // or "messages", "answer", any field the environment reads). Throws
  // sdk::DataError naming example.location when a field it needs is missing.
  virtual std::unique_ptr<Episode> start(const Example& example) = 0;
};

}  // namespace ptrain::sdk
