// What a reward function written outside C++ (Python, an HTTP server) gets
// for a batch of completions, and the checks on what it returns.
#pragma once

#include "ptrain/sdk/rewards.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace ptrain::rewards {

// One JSON object of parallel lists, one entry per completion, as TRL passes
// a reward function's arguments:
//   prompts            [str]   the prompt text as the model read it
//   completions        [str]   the completion text
//   completion_tokens  [int]   its length in tokens, <eos> included
//   truncated          [bool]  it hit max_completion_length
//   <field>            [any]   every other field of the dataset lines (null
//                              where a line lacks it), e.g. answer
// A dataset field named like one of the four above is left out (the
// completion's own value wins).
nlohmann::json reward_batch_json(const std::vector<sdk::RewardInput>& inputs);

// reward_batch_json as JSON text. Bytes that are not UTF-8 (a byte-level
// model may sample any byte) become U+FFFD, as a Hugging Face tokenizer's
// decode writes them, instead of failing the step.
std::string reward_batch_text(const std::vector<sdk::RewardInput>& inputs);

// Throws sdk::PluginError naming `function` unless there is one finite
// score per input; a non-finite score names the example it was given for.
void check_reward_scores(const std::string& function, const std::vector<double>& scores,
                         const std::vector<sdk::RewardInput>& inputs);

}  // namespace ptrain::rewards
