// The built-in reward functions, for tasks with a known answer (the bundled
// arithmetic task among them), shared by GRPO's training rewards and the
// core's evaluation by generation (docs/evaluation.md):
//   accuracy  exact match: 1 if the completion text, blanks trimmed, equals
//             the example's answer field (trimmed too), else 0
//   format    1 if the completion ended by itself (<eos> or a stop string)
//             and its trimmed text matches format_pattern, else 0
//   length    DAPO's soft overlong punishment (Yu et al. 2025, eq. 13), with
//             L_max = max_completion_length, cache L_c, completion length |y|:
//               0 if |y| ≤ L_max − L_c;  (L_max − L_c − |y|) / L_c if |y| ≤ L_max;  −1 beyond
//   closeness max(0, 1 − |y − a| / 10) for a numeric completion y and answer
//             a, else 0: partial credit, so a group of near misses still
//             has reward variance to learn from
#pragma once

#include "ptrain/sdk/rewards.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ptrain::sdk {

struct BuiltinRewardSettings {
  std::string answer_field = "answer";     // accuracy, closeness
  std::string format_pattern = "^-?[0-9]+$";  // format (ECMAScript regex over the trimmed text)
  int64_t max_completion_length = 64;      // length: L_max
  int64_t overlong_cache = 16;             // length: L_c, in (0, L_max]
};

std::vector<std::string> builtin_reward_names();  // accuracy, format, length, closeness

// Throws sdk::ConfigError for a name builtin_reward_names() does not list,
// or a format_pattern that is not a valid regex.
std::unique_ptr<RewardFunction> make_builtin_reward(const std::string& name, const BuiltinRewardSettings& settings);

// A reward entry naming a source that the core opens (a Python function, a
// reward server) rather than a built-in or a reward library's function:
//   python:FILE.py:FUNCTION  a Python function (run by the core's interpreter)
//   http://HOST:PORT/PATH    a reward server (#timeout_s=S&retries=N may follow)
struct RewardSource {
  std::string source;       // what the core opens: python:FILE.py, or the URL
  std::string function;     // what the opened source creates: FUNCTION, or the URL
  std::string metric_name;  // FUNCTION, or the URL without http:// and its settings
};
std::optional<RewardSource> reward_source_of(const std::string& entry);  // nullopt: not such an entry

// Blanks (spaces, tabs, newlines) removed from both ends.
std::string trim_blanks(const std::string& text);

}  // namespace ptrain::sdk
