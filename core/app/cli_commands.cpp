#include "core/app/cli_commands.h"

#include "core/app/cli_options.h"
#include "core/app/commands.h"
#include "core/app/eval_command.h"
#include "core/app/generate_command.h"
#include "core/app/report_command.h"
#include "core/app/tokenize_command.h"
#include "ptrain/sdk/errors.h"

#include <algorithm>
#include <iostream>

namespace ptrain::app {
namespace po = boost::program_options;

namespace {

using Arguments = std::vector<std::string>;

int run_train(const CliCommand& self, const Arguments& arguments) {
  po::options_description options = config_options();
  po::options_description_easy_init add = options.add_options();
  add("overwrite", "replace an existing run in output_dir");
  add("resume", po::value<std::string>(),
      "continue from a checkpoint: auto (the latest in output_dir, if any) or a checkpoint directory");
  po::variables_map values;
  if (!parse_command(self.name, self.usage, options, arguments, values)) return kExitOk;
  if (values.count("overwrite") && values.count("resume")) {
    throw sdk::UsageError("--overwrite and --resume exclude each other");
  }
  return command_train(config_options_from(values), values.count("overwrite") > 0,
                       values.count("resume") ? values["resume"].as<std::string>() : "");
}

int run_validate(const CliCommand& self, const Arguments& arguments) {
  po::options_description options = config_options();
  po::variables_map values;
  if (!parse_command(self.name, self.usage, options, arguments, values)) return kExitOk;
  return command_validate(config_options_from(values));
}

int run_plugins(const CliCommand& self, const Arguments& arguments) {
  po::options_description options("options");
  po::options_description_easy_init add = options.add_options();
  add("plugin-dir", po::value<std::vector<std::string>>()->composing(), "also search this directory (repeatable)");
  add("describe", po::value<std::string>(), "print this plugin's [module] keys: type, default, allowed, doc");
  po::variables_map values;
  if (!parse_command(self.name, self.usage, options, arguments, values)) return kExitOk;
  if (values.count("describe")) {
    return command_describe_plugin(values["describe"].as<std::string>(), plugin_dirs_from(values));
  }
  return command_plugins(plugin_dirs_from(values));
}

int run_schema(const CliCommand& self, const Arguments& arguments) {
  po::options_description options("options");
  po::options_description_easy_init add = options.add_options();
  add("plugin", po::value<std::vector<std::string>>()->composing(),
      "also document this plugin's [module] keys (repeatable)");
  add("plugin-dir", po::value<std::vector<std::string>>()->composing(), "also search this directory (repeatable)");
  po::variables_map values;
  if (!parse_command(self.name, self.usage, options, arguments, values)) return kExitOk;
  std::vector<std::string> plugins;
  if (values.count("plugin")) plugins = values["plugin"].as<std::vector<std::string>>();
  return command_schema(plugins, plugin_dirs_from(values));
}

int run_tokenize(const CliCommand& self, const Arguments& arguments) {
  po::options_description options("options");
  po::options_description_easy_init add = options.add_options();
  add("tokenizer", po::value<std::string>()->required(), "a Hugging Face tokenizer.json, or \"bytes\"");
  add("template", po::value<std::string>(),
      "lines are conversations: render field \"messages\" (or --jsonl FIELD) with chatml, llama3, plain or auto "
      "(the model's own chat template from tokenizer_config.json)");
  add("jsonl", po::value<std::string>(), "lines are JSON objects: tokenize this field (not the whole line)");
  add("decode", "lines are JSON arrays of ids: write the text (with --jsonl, as {\"FIELD\": text})");
  add("generation-prompt", "with --template: end with the assistant prefix, as a generation prompt");
  add("mask", "with --template: write {\"ids\": [...], \"trainable\": [...]} (the assistant-only loss mask)");
  add("render", "with --template: write each rendered conversation as one JSON string instead of ids");
  po::variables_map values;
  if (!parse_command(self.name, self.usage, options, arguments, values)) return kExitOk;
  TokenizeOptions tokenize;
  tokenize.tokenizer = values["tokenizer"].as<std::string>();
  if (values.count("template")) tokenize.chat_template = values["template"].as<std::string>();
  if (values.count("jsonl")) tokenize.jsonl_field = values["jsonl"].as<std::string>();
  tokenize.decode = values.count("decode") > 0;
  tokenize.generation_prompt = values.count("generation-prompt") > 0;
  tokenize.show_mask = values.count("mask") > 0;
  tokenize.render = values.count("render") > 0;
  return command_tokenize(tokenize, std::cin, std::cout);
}

int run_launch(const CliCommand& self, const Arguments& arguments) {
  // Everything after `--` is the workers' command, untouched by option parsing.
  const auto separator = std::find(arguments.begin(), arguments.end(), "--");
  const Arguments own(arguments.begin(), separator);
  po::options_description options("options");
  po::options_description_easy_init add = options.add_options();
  add("nproc", po::value<int>()->required(), "number of worker processes (ranks) on this machine");
  add("nnodes", po::value<int>()->default_value(1), "number of machines, each running its own launcher");
  add("node-rank", po::value<int>()->default_value(0), "this machine's place among them (0: hosts rank 0)");
  add("master-addr", po::value<std::string>()->default_value("127.0.0.1"), "node 0's address, for the rendezvous");
  add("master-port", po::value<int>()->default_value(0), "rendezvous port (0: a free one; needed with --nnodes > 1)");
  po::variables_map values;
  if (!parse_command(self.name, self.usage, options, own, values)) return kExitOk;
  dist::LaunchOptions launch;
  launch.nproc = values["nproc"].as<int>();
  launch.nnodes = values["nnodes"].as<int>();
  launch.node_rank = values["node-rank"].as<int>();
  launch.master_addr = values["master-addr"].as<std::string>();
  launch.master_port = values["master-port"].as<int>();
  if (separator != arguments.end()) launch.command.assign(separator + 1, arguments.end());
  for (const CliCommand& command : cli_commands()) launch.ptrain_commands.insert(command.name);
  return command_launch(launch);
}

// The run directories are positional, so this command parses on its own
// rather than through parse_command (and its help has its own layout).
int run_report(const CliCommand& self, const Arguments& arguments) {
  po::options_description options("options");
  options.add_options()("output,o", po::value<std::string>(), "the HTML file to write (default: RUN_DIR/report.html)");
  add_help_option(options);
  po::options_description positional_option;
  positional_option.add_options()("run-dir", po::value<std::vector<std::string>>(), "run directory");
  po::positional_options_description positional;
  positional.add("run-dir", -1);
  po::options_description all;
  all.add(options).add(positional_option);
  po::variables_map values;
  po::store(po::command_line_parser(arguments).options(all).positional(positional).run(), values);
  if (values.count("help")) {
    std::cout << "usage: ptrain " << self.name << " " << self.usage << "\n\n" << options << "\n";
    return kExitOk;
  }
  if (!values.count("run-dir")) {
    throw sdk::UsageError("ptrain report needs a run directory (see: ptrain report --help)");
  }
  const auto dirs = values["run-dir"].as<std::vector<std::string>>();
  return command_report(std::vector<std::filesystem::path>(dirs.begin(), dirs.end()),
                        values.count("output") ? values["output"].as<std::string>() : "", std::cout);
}

}  // namespace

const std::vector<CliCommand>& cli_commands() {
  static const std::vector<CliCommand> commands{
      {"train", "run a training job:           ptrain train -c configs/sft.toml [--set key=value]...",
       "-c FILE [--set key=value]... [--overwrite | --resume auto|PATH]", run_train},
      {"validate", "check config, plugin, data and model without training", "-c FILE [--set key=value]...",
       run_validate},
      {"plugins", "list the plugins found on the plugin search path; --describe NAME: its config keys",
       "[--describe NAME] [--plugin-dir DIR]...", run_plugins},
      {"schema", "print the config reference (every key, type, default, range) as Markdown", "[--plugin NAME]...",
       run_schema},
      {"tokenize", "text on stdin to token ids:    ptrain tokenize --tokenizer models/x/tokenizer.json < docs.txt",
       "--tokenizer PATH|bytes [--template NAME [--render] [--generation-prompt] [--mask]] [--jsonl FIELD] [--decode] "
       "< input",
       run_tokenize},
      {"generate", "completions from a model:      ptrain generate -m runs/sft --prompt '12+7='",
       "-m MODEL|RUN|ADAPTER [--base DIR] (--prompt TEXT... | --prompts FILE.jsonl|-) [--format text|jsonl] "
       "[sampling options] [-o FILE]",
       run_generate},
      {"eval", "score a model by generation:   ptrain eval -m runs/sft -d data/arith/test.jsonl -r accuracy",
       "-m MODEL|RUN|ADAPTER -d FILE.jsonl [-r REWARD]... [sampling options] [-o FILE.json]", run_eval},
      {"launch", "run N local worker processes:  ptrain launch --nproc 2 -- train -c configs/sft.toml",
       "--nproc N [--nnodes N --node-rank R --master-addr ADDR] [--master-port P] -- <ptrain command or program> "
       "[args...]",
       run_launch},
      {"report", "HTML charts of runs' metrics:  ptrain report runs/sft [runs/other...] [-o report.html]",
       "RUN_DIR [RUN_DIR...] [-o FILE]", run_report},
  };
  return commands;
}

const CliCommand* find_cli_command(const std::string& name) {
  for (const CliCommand& command : cli_commands()) {
    if (name == command.name) return &command;
  }
  return nullptr;
}

}  // namespace ptrain::app
