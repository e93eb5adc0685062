// Reward functions for online RL (GRPO): a score per completion.
//
// A plugin may ship its own functions by implementing RewardFunction; the
// GRPO plugin combines the named ones with `reward_weights` (docs/grpo.md).
#pragma once

#include "ptrain/sdk/batch.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ptrain::sdk {

// One completion to score.
struct RewardInput {
  const Example* example = nullptr;  // the prompt's dataset line (e.g. its "answer" field)
  std::string prompt;                // the prompt text as the model read it
  std::string completion;            // the completion's text (special tokens such as <eos> dropped)
  int64_t completion_tokens = 0;     // its length in tokens, <eos> included
  bool truncated = false;            // it reached the token limit without <eos> or a stop string
};

class RewardFunction {
 public:
  virtual ~RewardFunction() = default;
  // The name metrics use: rewards/<name>/mean and rewards/<name>/std.
  virtual std::string name() const = 0;
  // One finite score per input, in order. Throws sdk::DataError naming the
  // example's location when a field it needs is missing.
  virtual std::vector<double> score(const std::vector<RewardInput>& inputs) = 0;
};

}  // namespace ptrain::sdk
