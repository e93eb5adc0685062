#include "core/app/eval_command.h"

#include "core/app/cli_options.h"
#include "core/app/generation_session.h"
#include "core/app/output_file.h"
#include "core/data/jsonl_reader.h"
#include "core/generation/completion_rewards.h"
#include "core/log/logger.h"
#include "ptrain/sdk/errors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>

namespace ptrain::app {
namespace {

// The held-out prompts (generate_completions reads each before it generates any).
std::vector<sdk::Example> read_eval_prompts(const EvalOptions& options) {
  std::vector<sdk::Example> prompts = generation::held_out_prompts(data::read_jsonl(options.data));
  if (options.max_examples > 0 && static_cast<int64_t>(prompts.size()) > options.max_examples) {
    prompts.resize(static_cast<size_t>(options.max_examples));
  }
  return prompts;
}

void print_table(const EvalOptions& options, const GenerationSession& session, size_t num_prompts,
                 const std::vector<generation::NamedReward>& rewards, const std::vector<double>& means) {
  const double temperature = options.settings.sampling.temperature;
  std::cout << "eval of " << generation::describe(session.source) << " on " << options.data << ": " << num_prompts
            << " prompts, " << options.settings.per_prompt
            << (options.settings.per_prompt == 1 ? " completion" : " completions") << " each, "
            << (temperature == 0.0 ? std::string("greedy") : "temperature " + nlohmann::json(temperature).dump())
            << "\n\n  reward              mean\n";
  for (size_t f = 0; f < rewards.size(); ++f) {
    char line[160];
    std::snprintf(line, sizeof line, "  %-18s %.4f\n", rewards[f].name.c_str(), means[f]);
    std::cout << line;
  }
  std::cout.flush();
}

nlohmann::ordered_json result_json(const EvalOptions& options, const GenerationSession& session,
                           const std::vector<generation::Completion>& completions,
                           const std::vector<sdk::Example>& prompts, const std::vector<generation::NamedReward>& rewards,
                           const at::Tensor& scores, const std::vector<double>& means) {
  const sdk::SamplingParams& sampling = options.settings.sampling;
  nlohmann::ordered_json result{{"model", generation::describe(session.source)},
                        {"data", options.data},
                        {"prompts", prompts.size()},
                        {"completions_per_prompt", options.settings.per_prompt},
                        {"sampling",
                         {{"temperature", sampling.temperature},
                          {"top_k", sampling.top_k},
                          {"top_p", sampling.top_p},
                          {"min_p", sampling.min_p},
                          {"repetition_penalty", sampling.repetition_penalty},
                          {"max_new_tokens", sampling.max_new_tokens},
                          {"stop", sampling.stop_strings},
                          {"seed", sampling.seed}}},
                        {"means", nlohmann::ordered_json::object()},
                        {"completions", nlohmann::ordered_json::array()}};
  for (size_t f = 0; f < rewards.size(); ++f) result["means"][rewards[f].name] = means[f];
  const auto table = scores.accessor<double, 2>();
  for (size_t i = 0; i < completions.size(); ++i) {
    const generation::Completion& completion = completions[i];
    nlohmann::ordered_json line{{"source", prompts[static_cast<size_t>(completion.prompt)].location},
                        {"generation", completion.generation},
                        {"prompt", completion.prompt_text},
                        {"completion", session.loaded.tokenizer->decode(completion.completion_ids)},
                        {"stop_reason", generation::stop_reason_name(completion.stop_reason)},
                        {"rewards", nlohmann::ordered_json::object()}};
    for (size_t f = 0; f < rewards.size(); ++f) line["rewards"][rewards[f].name] = table[i][f];
    result["completions"].push_back(std::move(line));
  }
  return result;
}

}  // namespace

int command_eval(const EvalOptions& options) {
  GenerationSession session = open_generation_session(options.model);
  if (!options.output.empty()) check_output_dir(options.output, "--output");
  const std::vector<sdk::Example> prompts = read_eval_prompts(options);
  sdk::BuiltinRewardSettings reward_settings = options.reward_settings;
  reward_settings.answer_field =
      generation::resolve_answer_field(options.answer_field, options.rewards, prompts, "--answer-field");
  std::vector<generation::NamedReward> rewards =
      generation::make_rewards(options.rewards, reward_settings, "--reward");
  const std::vector<generation::Completion> completions = generation::generate_completions(
      *session.loaded.model, *session.loaded.tokenizer, prompts, options.settings, *session.communicator);
  const at::Tensor scores = generation::score_completions(rewards, completions, prompts, *session.loaded.tokenizer,
                                                          *session.communicator, session.device);
  const std::vector<double> means = generation::reward_means(scores);
  if (!session.rank_zero()) return 0;
  print_table(options, session, prompts.size(), rewards, means);
  if (!options.output.empty()) {
    const nlohmann::ordered_json result = result_json(options, session, completions, prompts, rewards, scores, means);
    write_file_atomically(options.output, "--output", [&](std::ostream& out) {
      out << result.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    });
  }
  return 0;
}

int run_eval(const CliCommand& self, const std::vector<std::string>& arguments) {
  namespace po = boost::program_options;
  const sdk::BuiltinRewardSettings defaults;
  po::options_description options("options");
  add_model_options(options);
  po::options_description_easy_init add = options.add_options();
  add("data,d", po::value<std::string>()->required(),
      "held-out JSONL: \"prompt\" or \"messages\", and the fields the rewards read (e.g. \"answer\")");
  add("reward,r", po::value<std::vector<std::string>>()->composing(),
      "accuracy (exact match), closeness, format, length, python:FILE.py:FUNCTION or an http:// reward server "
      "(repeatable; default: accuracy)");
  add("answer-field", po::value<std::string>(),
      "the field accuracy and closeness compare with (default: answer, or completion in a file of SFT examples)");
  add("format-pattern", po::value<std::string>()->default_value(defaults.format_pattern),
      "the regex the format reward matches");
  add("max-examples", po::value<int64_t>()->default_value(0), "the first N prompts only (0: all)");
  add("output,o", po::value<std::string>(), "also write the figures and every scored completion as JSON");
  add_sampling_options(options, 0.0);
  po::variables_map values;
  if (!parse_command(self.name, self.usage, options, arguments, values)) return kExitOk;
  EvalOptions eval;
  eval.model = model_options_from(values);
  eval.settings = generation_settings_from(values);
  eval.data = values["data"].as<std::string>();
  eval.rewards = values.count("reward") ? values["reward"].as<std::vector<std::string>>()
                                        : std::vector<std::string>{"accuracy"};
  if (values.count("answer-field")) eval.answer_field = values["answer-field"].as<std::string>();
  eval.reward_settings.format_pattern = values["format-pattern"].as<std::string>();
  eval.reward_settings.max_completion_length = eval.settings.sampling.max_new_tokens;
  eval.reward_settings.overlong_cache = std::max<int64_t>(1, eval.settings.sampling.max_new_tokens / 4);
  eval.max_examples = values["max-examples"].as<int64_t>();
  if (eval.max_examples < 0) throw sdk::UsageError("--max-examples " + std::to_string(eval.max_examples) + ": must be >= 0");
  if (values.count("output")) eval.output = values["output"].as<std::string>();
  return command_eval(eval);
}

}  // namespace ptrain::app
