// `ptrain generate`: completions of prompts from a trained model
// (docs/generation.md).
#pragma once

#include "core/app/cli_commands.h"
#include "core/app/generation_options.h"

#include <string>
#include <vector>

namespace ptrain::app {

struct GenerateOptions {
  ModelOptions model;
  generation::GenerationSettings settings;
  std::vector<std::string> prompts;  // --prompt texts
  std::string prompt_file;           // --prompts: a JSONL file, or "-" for standard input
  bool jsonl = false;                // --format jsonl
  std::string output;                // --output FILE; empty: standard output
};

// Rank 0 writes the completions; every rank generates its share.
int command_generate(const GenerateOptions& options);

// `ptrain generate ARGS`: parses the options (cli_commands.h) and runs it.
int run_generate(const CliCommand& self, const std::vector<std::string>& arguments);

}  // namespace ptrain::app
