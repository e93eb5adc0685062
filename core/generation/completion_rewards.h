// Completions scored by reward functions: `ptrain eval`'s figures
// (docs/generation.md#evaluation).
#pragma once

#include "core/dist/communicator.h"
#include "core/generation/completions.h"
#include "ptrain/sdk/batch.h"
#include "ptrain/sdk/rewards.h"
#include "ptrain/sdk/tokenizer.h"
#include "ptrain/sdk/util/builtin_rewards.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <memory>
#include <string>
#include <vector>

namespace ptrain::generation {

struct NamedReward {
  std::string name;  // the built-in's name, the Python function's, or the URL's host/path
  std::unique_ptr<sdk::RewardFunction> function;
};

// Each entry a built-in name (sdk/util/builtin_rewards.h, with `settings`),
// python:FILE.py:FUNCTION or an http(s):// reward server's URL. Throws
// sdk::ConfigError naming `option` and the entry for an unknown name, a
// malformed entry or a source that cannot be opened, or for a name given twice.
std::vector<NamedReward> make_rewards(const std::vector<std::string>& entries, const sdk::BuiltinRewardSettings& settings,
                                      const std::string& option);

// [completions, rewards] float64 on the host of every rank (gathered on
// `device`, where the communicator's collectives run): rank r scores the
// completions of its own prompts (prompt i mod R = r), and the scores are
// gathered exactly (each slot written by one rank). Throws sdk::PluginError
// naming the function for a wrong count or a score that is not finite.
at::Tensor score_completions(std::vector<NamedReward>& rewards, const std::vector<Completion>& completions,
                             const std::vector<sdk::Example>& prompts, const sdk::Tokenizer& tokenizer,
                             dist::Communicator& communicator, at::Device device);

// The answer field of `given` (may be empty: "answer", or "completion" when
// no prompt has "answer" and every one a completion, as in a file of SFT
// examples). Throws sdk::DataError naming the first prompt without it when
// an entry of `rewards` reads it (accuracy, closeness) and naming `option`.
std::string resolve_answer_field(const std::string& given, const std::vector<std::string>& rewards,
                                 const std::vector<sdk::Example>& prompts, const std::string& option);

// The metric name make_rewards gives `entry`, without opening its source.
std::string reward_name(const std::string& entry);

// Column means, summed in completion order: the same for any world size.
std::vector<double> reward_means(const at::Tensor& scores);

}  // namespace ptrain::generation
