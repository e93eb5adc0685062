// The built-in reward functions, for tasks with a known answer (the bundled
// arithmetic task among them):
//   accuracy  1 if the completion text, blanks trimmed, equals the example's
//             answer field, else 0
//   format    1 if the completion ended by itself (<eos> or a stop string)
//             and its trimmed text matches format_pattern, else 0
//   length    DAPO's soft overlong punishment (Yu et al. 2025, eq. 13), with
//             L_max = max_completion_length, cache L_c, completion length |y|:
//               0 if |y| ≤ L_max − L_c;  (L_max − L_c − |y|) / L_c if |y| ≤ L_max;  −1 beyond
//   closeness max(0, 1 − |y − a| / 10) for a numeric completion y and answer
//             a, else 0: partial credit, so a group of near misses still
//             has reward variance to learn from
#pragma once

#include "grpo_config.h"

#include "ptrain/sdk/context.h"
#include "ptrain/sdk/rewards.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ptrain::grpo {

std::vector<std::string> builtin_reward_list();  // accuracy, format, length, closeness

// Throws sdk::ConfigError for an unknown name.
std::unique_ptr<sdk::RewardFunction> make_builtin_reward(const std::string& name, const GrpoConfig& config);

// A reward_funcs entry naming a reward source that the core opens
// (Context::open_reward_library) rather than a built-in or library function:
//   python:FILE.py:FUNCTION  a Python function (run by the core's interpreter)
//   http://HOST:PORT/PATH    a reward server (#timeout_s=S&retries=N may follow)
struct RewardSource {
  std::string source;       // what open_reward_library opens: python:FILE.py, or the URL
  std::string function;     // what the opened source creates: FUNCTION, or the URL
  std::string metric_name;  // FUNCTION, or the URL without http:// and its settings
};
std::optional<RewardSource> reward_source_of(const std::string& entry);  // nullopt: not such an entry

// Throws sdk::ConfigError naming module.reward_funcs for a python: entry
// that is not python:FILE.py:FUNCTION (the file and function are checked
// when setup() opens them).
void check_reward_source(const sdk::ConfigValues& values, const std::string& entry, const RewardSource& source);

// The functions of config.reward_funcs, in order: a python: or http:// entry
// makes the function the core opens from it; a built-in name makes the
// built-in, any other name the function of that name in one of the reward
// libraries of config.reward_plugins, which the core opens and checks
// (Context::open_reward_library). Throws sdk::ConfigError naming the key for
// a name that no source or more than one offers; sdk::PluginError (from the
// core, prefixed with the key's location) for a library it refuses.
std::vector<std::unique_ptr<sdk::RewardFunction>> make_reward_functions(sdk::Context& ctx, const GrpoConfig& config);

// Blanks (spaces, tabs, newlines) removed from both ends.
std::string trim_blanks(const std::string& text);

}  // namespace ptrain::grpo
