// `ptrain eval`: a model's completions of a held-out JSONL file scored by
// reward functions, printed as a table and written as JSON
// (docs/generation.md#evaluation).
#pragma once

#include "core/app/cli_commands.h"
#include "core/app/generation_options.h"
#include "ptrain/sdk/util/builtin_rewards.h"

#include <string>
#include <vector>

namespace ptrain::app {

struct EvalOptions {
  ModelOptions model;
  generation::GenerationSettings settings;
  std::string data;                  // JSONL: "prompt" or "messages", and what the rewards read
  std::vector<std::string> rewards;  // built-in names, python:FILE.py:FUNCTION, http(s):// URLs
  std::string answer_field;  // empty: "answer", or "completion" when no line has "answer" and every line a completion
  sdk::BuiltinRewardSettings reward_settings;  // its answer_field resolved from the one above
  int64_t max_examples = 0;  // 0: all
  std::string output;        // JSON file; empty: none
};

int command_eval(const EvalOptions& options);

// `ptrain eval ARGS`: parses the options (cli_commands.h) and runs it.
int run_eval(const CliCommand& self, const std::vector<std::string>& arguments);

}  // namespace ptrain::app
