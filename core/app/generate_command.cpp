#include "core/app/generate_command.h"

#include "core/app/cli_options.h"
#include "core/app/generation_session.h"
#include "core/app/output_file.h"
#include "core/data/jsonl_reader.h"
#include "core/generation/completion_output.h"
#include "ptrain/sdk/errors.h"

#include <iostream>

namespace ptrain::app {
namespace {

// --prompt texts as examples {"prompt": TEXT}, or the lines of --prompts.
std::vector<sdk::Example> read_prompts(const GenerateOptions& options, int world_size) {
  if (options.prompts.empty() == options.prompt_file.empty()) {
    throw sdk::UsageError("give the prompts with --prompt TEXT (repeatable) or --prompts FILE.jsonl (- for stdin)");
  }
  if (options.prompt_file == "-") {
    if (world_size > 1) throw sdk::UsageError("--prompts -: several ranks cannot share standard input; give a file");
    return data::read_jsonl(std::cin, "stdin");
  }
  if (!options.prompt_file.empty()) return data::read_jsonl(options.prompt_file);
  std::vector<sdk::Example> prompts;
  for (size_t i = 0; i < options.prompts.size(); ++i) {
    prompts.push_back({static_cast<int64_t>(i), "--prompt " + std::to_string(i + 1),
                       nlohmann::json{{"prompt", options.prompts[i]}}});
  }
  return prompts;
}

void write(const GenerateOptions& options, std::ostream& out, const std::vector<generation::Completion>& completions,
           const std::vector<sdk::Example>& prompts, const sdk::Tokenizer& tokenizer) {
  if (options.jsonl) {
    generation::write_completions_jsonl(out, completions, prompts, tokenizer, options.settings.with_logprobs);
  } else {
    generation::write_completions_text(out, completions, tokenizer);
  }
}

}  // namespace

int command_generate(const GenerateOptions& options) {
  GenerationSession session = open_generation_session(options.model);
  const std::vector<sdk::Example> prompts = read_prompts(options, session.communicator->world_size());
  if (!options.output.empty()) check_output_dir(options.output, "--output");
  const std::vector<generation::Completion> completions =
      generation::generate_completions(*session.loaded.model, *session.loaded.tokenizer, prompts, options.settings,
                                       *session.communicator);
  if (!session.rank_zero()) return 0;
  if (options.output.empty()) {
    write(options, std::cout, completions, prompts, *session.loaded.tokenizer);
  } else {
    write_file_atomically(options.output, "--output", [&](std::ostream& out) {
      write(options, out, completions, prompts, *session.loaded.tokenizer);
    });
  }
  return 0;
}

int run_generate(const CliCommand& self, const std::vector<std::string>& arguments) {
  namespace po = boost::program_options;
  po::options_description options("options");
  add_model_options(options);
  po::options_description_easy_init add = options.add_options();
  add("prompt,p", po::value<std::vector<std::string>>()->composing(), "a prompt's text (repeatable)");
  add("prompts", po::value<std::string>(),
      "a JSONL file of prompts (\"prompt\": text, or \"messages\": a chat), - for standard input");
  add("format", po::value<std::string>()->default_value("text"), "text (for a person) or jsonl (for a program)");
  add("logprobs", "with --format jsonl: each completion token's log-probability under the model");
  add("output,o", po::value<std::string>(), "write to this file (default: standard output)");
  add_sampling_options(options, 1.0);
  po::variables_map values;
  if (!parse_command(self.name, self.usage, options, arguments, values)) return kExitOk;
  GenerateOptions generate;
  generate.model = model_options_from(values);
  generate.settings = generation_settings_from(values);
  if (values.count("prompt")) generate.prompts = values["prompt"].as<std::vector<std::string>>();
  if (values.count("prompts")) generate.prompt_file = values["prompts"].as<std::string>();
  const std::string format = values["format"].as<std::string>();
  if (format != "text" && format != "jsonl") throw sdk::UsageError("--format " + format + ": expected text or jsonl");
  generate.jsonl = format == "jsonl";
  generate.settings.with_logprobs = values.count("logprobs") > 0;
  if (generate.settings.with_logprobs && !generate.jsonl) {
    throw sdk::UsageError("--logprobs: the text format has no place for them; add --format jsonl");
  }
  if (values.count("output")) generate.output = values["output"].as<std::string>();
  return command_generate(generate);
}

}  // namespace ptrain::app
