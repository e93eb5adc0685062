// Reward functions for online RL (GRPO): a score per completion.
//
// The GRPO plugin has built-in functions; more come from reward libraries,
// shared libraries that export one C-linkage entry listing their functions
// (sdk/reward_plugin.h). A plugin never opens such a library itself: it asks
// Context::open_reward_library (sdk/context.h), and the core loads it with
// the same checks as a plugin. docs/grpo.md shows both.
#pragma once

#include "ptrain/sdk/batch.h"

#include <cstdint>
#include <memory>
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

// A reward library the core has loaded and checked (ABI, LibTorch, trust).
// Functions it creates keep the library loaded for as long as they live, so
// the RewardLibrary itself may be dropped once they are made.
class RewardLibrary {
 public:
  virtual ~RewardLibrary() = default;
  virtual std::string name() const = 0;  // the library's own name (its entry's `name`)
  virtual std::string path() const = 0;  // the file opened, symlinks resolved
  // The names of the functions it offers, in the order its entry lists them.
  virtual std::vector<std::string> function_names() const = 0;
  // A new instance of the named function. Throws sdk::ConfigError naming the
  // library and the functions it offers when it has no such function.
  virtual std::unique_ptr<RewardFunction> create(const std::string& function_name) const = 0;
};

}  // namespace ptrain::sdk
