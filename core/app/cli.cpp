#include "core/app/cli.h"

#include "core/app/commands.h"
#include "core/app/report_command.h"
#include "core/app/tokenize_command.h"
#include "ptrain/sdk/errors.h"
#include "ptrain/sdk/plugin.h"

#include <boost/program_options.hpp>
#include <c10/util/Exception.h>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

namespace ptrain::app {
namespace po = boost::program_options;

namespace {

constexpr int kExitOk = 0;
constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;

const char* const kOverview =
    "ptrain: post-training for causal language models (SFT, DPO, GRPO as plugins)\n"
    "\n"
    "usage: ptrain <command> [options]\n"
    "\n"
    "commands:\n"
    "  train      run a training job:           ptrain train -c configs/sft.toml [--set key=value]...\n"
    "  validate   check config, plugin, data and model without training\n"
    "  plugins    list the plugins found on the plugin search path; --describe NAME: its config keys\n"
    "  schema     print the config reference (every key, type, default, range) as Markdown\n"
    "  tokenize   text on stdin to token ids:    ptrain tokenize --tokenizer models/x/tokenizer.json < docs.txt\n"
    "  launch     run N local worker processes:  ptrain launch --nproc 2 -- train -c configs/sft.toml\n"
    "  report     HTML charts of runs' metrics:  ptrain report runs/sft [runs/other...] [-o report.html]\n"
    "\n"
    "  ptrain <command> --help   options of a command\n"
    "  ptrain --version          versions of ptrain, its SDK ABI and LibTorch\n";

po::options_description config_options() {
  po::options_description options("config options");
  options.add_options()
      ("config,c", po::value<std::string>()->required(), "TOML config file")
      ("set", po::value<std::vector<std::string>>()->composing(),
       "override a config key, e.g. --set optim.lr=3e-4 (repeatable)")
      ("plugin-dir", po::value<std::vector<std::string>>()->composing(),
       "also search this directory for plugins, before the default ones (repeatable)");
  return options;
}

po::options_description help_option() {
  po::options_description options;
  options.add_options()("help,h", "show this help");
  return options;
}

std::vector<std::filesystem::path> plugin_dirs_from(const po::variables_map& values) {
  std::vector<std::filesystem::path> dirs;
  if (values.count("plugin-dir")) {
    for (const auto& dir : values["plugin-dir"].as<std::vector<std::string>>()) dirs.emplace_back(dir);
  }
  return dirs;
}

ConfigOptions config_options_from(const po::variables_map& values) {
  ConfigOptions options;
  options.config_file = values["config"].as<std::string>();
  if (values.count("set")) options.overrides = values["set"].as<std::vector<std::string>>();
  options.plugin_dirs = plugin_dirs_from(values);
  return options;
}

// Parses the arguments after the command name; returns false after printing help.
bool parse_command(const std::string& command, const std::string& usage, const po::options_description& visible,
                   const std::vector<std::string>& arguments, po::variables_map& values) {
  po::options_description all;
  all.add(help_option()).add(visible);
  po::store(po::command_line_parser(arguments).options(all).run(), values);
  if (values.count("help")) {
    std::cout << "usage: ptrain " << command << " " << usage << "\n\n" << all << "\n";
    return false;
  }
  try {
    po::notify(values);
  } catch (const po::error& error) {
    throw sdk::UsageError(std::string(error.what()) + " (see: ptrain " + command + " --help)");
  }
  return true;
}

int dispatch(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::cout << kOverview;
    return args.empty() ? kExitUsage : kExitOk;
  }
  if (args[0] == "--version") {
    std::cout << "ptrain " << PTRAIN_VERSION << " (SDK " << sdk::kSdkVersion << ", SDK ABI " << sdk::kAbiVersion
              << ", LibTorch " << PTRAIN_TORCH_VERSION << ")\n";
    return kExitOk;
  }
  const std::string command = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  po::variables_map values;

  if (command == "train") {
    po::options_description options = config_options();
    options.add_options()("overwrite", "replace an existing run in output_dir")
        ("resume", po::value<std::string>(),
         "continue from a checkpoint: auto (the latest in output_dir, if any) or a checkpoint directory");
    if (!parse_command(command, "-c FILE [--set key=value]... [--overwrite | --resume auto|PATH]", options, rest,
                       values)) {
      return kExitOk;
    }
    if (values.count("overwrite") && values.count("resume")) {
      throw sdk::UsageError("--overwrite and --resume exclude each other");
    }
    return command_train(config_options_from(values), values.count("overwrite") > 0,
                         values.count("resume") ? values["resume"].as<std::string>() : "");
  }
  if (command == "validate") {
    if (!parse_command(command, "-c FILE [--set key=value]...", config_options(), rest, values)) return kExitOk;
    return command_validate(config_options_from(values));
  }
  if (command == "schema") {
    po::options_description options("options");
    options.add_options()("plugin", po::value<std::vector<std::string>>()->composing(),
                          "also document this plugin's [module] keys (repeatable)")
        ("plugin-dir", po::value<std::vector<std::string>>()->composing(), "also search this directory (repeatable)");
    if (!parse_command(command, "[--plugin NAME]...", options, rest, values)) return kExitOk;
    std::vector<std::string> plugins;
    if (values.count("plugin")) plugins = values["plugin"].as<std::vector<std::string>>();
    return command_schema(plugins, plugin_dirs_from(values));
  }
  if (command == "launch") {
    // Everything after `--` is the workers' command, untouched by option parsing.
    const auto separator = std::find(rest.begin(), rest.end(), "--");
    const std::vector<std::string> own(rest.begin(), separator);
    po::options_description options("options");
    options.add_options()("nproc", po::value<int>()->required(), "number of worker processes (ranks) on this machine")
        ("master-port", po::value<int>()->default_value(0), "rendezvous port on 127.0.0.1 (0: a free port)");
    if (!parse_command(command, "--nproc N [--master-port P] -- <ptrain command or program> [args...]", options, own,
                       values)) {
      return kExitOk;
    }
    dist::LaunchOptions launch;
    launch.nproc = values["nproc"].as<int>();
    launch.master_port = values["master-port"].as<int>();
    if (separator != rest.end()) launch.command.assign(separator + 1, rest.end());
    return command_launch(launch);
  }
  if (command == "tokenize") {
    po::options_description options("options");
    options.add_options()
        ("tokenizer", po::value<std::string>()->required(), "a Hugging Face tokenizer.json, or \"bytes\"")
        ("template", po::value<std::string>(),
         "lines are conversations: render field \"messages\" (or --jsonl FIELD) with chatml, llama3, plain or auto")
        ("jsonl", po::value<std::string>(), "lines are JSON objects: tokenize this field (not the whole line)")
        ("decode", "lines are JSON arrays of ids: write the text (with --jsonl, as {\"FIELD\": text})")
        ("generation-prompt", "with --template: end with the assistant prefix, as a generation prompt")
        ("mask", "with --template: write {\"ids\": [...], \"trainable\": [...]} (the assistant-only loss mask)");
    if (!parse_command(command, "--tokenizer PATH|bytes [--template NAME] [--jsonl FIELD] [--decode] < input",
                       options, rest, values)) {
      return kExitOk;
    }
    TokenizeOptions tokenize;
    tokenize.tokenizer = values["tokenizer"].as<std::string>();
    if (values.count("template")) tokenize.chat_template = values["template"].as<std::string>();
    if (values.count("jsonl")) tokenize.jsonl_field = values["jsonl"].as<std::string>();
    tokenize.decode = values.count("decode") > 0;
    tokenize.generation_prompt = values.count("generation-prompt") > 0;
    tokenize.show_mask = values.count("mask") > 0;
    return command_tokenize(tokenize, std::cin, std::cout);
  }
  if (command == "report") {
    po::options_description options("options");
    options.add_options()("output,o", po::value<std::string>(), "the HTML file to write (default: RUN_DIR/report.html)");
    po::options_description positional_option;
    positional_option.add_options()("run-dir", po::value<std::vector<std::string>>(), "run directory");
    po::positional_options_description positional;
    positional.add("run-dir", -1);
    po::options_description all;
    all.add(help_option()).add(options).add(positional_option);
    po::store(po::command_line_parser(rest).options(all).positional(positional).run(), values);
    if (values.count("help")) {
      std::cout << "usage: ptrain report RUN_DIR [RUN_DIR...] [-o FILE]\n\n" << help_option() << options << "\n";
      return kExitOk;
    }
    if (!values.count("run-dir")) throw sdk::UsageError("ptrain report needs a run directory (see: ptrain report --help)");
    const auto dirs = values["run-dir"].as<std::vector<std::string>>();
    return command_report(std::vector<std::filesystem::path>(dirs.begin(), dirs.end()),
                          values.count("output") ? values["output"].as<std::string>() : "",
                          std::cout);
  }
  if (command == "plugins") {
    po::options_description options("options");
    options.add_options()("plugin-dir", po::value<std::vector<std::string>>()->composing(),
                          "also search this directory (repeatable)")
        ("describe", po::value<std::string>(), "print this plugin's [module] keys: type, default, allowed, doc");
    if (!parse_command(command, "[--describe NAME] [--plugin-dir DIR]...", options, rest, values)) return kExitOk;
    if (values.count("describe")) {
      return command_describe_plugin(values["describe"].as<std::string>(), plugin_dirs_from(values));
    }
    return command_plugins(plugin_dirs_from(values));
  }
  throw sdk::UsageError("unknown command '" + command + "' (commands: train, validate, plugins, schema, tokenize, launch, report; see ptrain --help)");
}

}  // namespace

int run_cli(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    return dispatch(args);
  } catch (const sdk::UsageError& error) {
    std::cerr << "ptrain: usage error: " << error.what() << "\n";
    return kExitUsage;
  } catch (const po::error& error) {
    std::cerr << "ptrain: usage error: " << error.what() << "\n";
    return kExitUsage;
  } catch (const sdk::ConfigError& error) {
    std::cerr << "ptrain: config error: " << error.what() << "\n";
    return kExitUsage;
  } catch (const sdk::Error& error) {
    std::cerr << "ptrain: error: " << error.what() << "\n";
    return kExitRuntime;
  } catch (const c10::Error& error) {
    // TORCH_CHECK failures: the first line says what; the rest is a C++ backtrace.
    const std::string message = error.what_without_backtrace();
    std::cerr << "ptrain: error: " << message.substr(0, message.find('\n')) << "\n";
    return kExitRuntime;
  } catch (const std::exception& error) {
    std::cerr << "ptrain: error: " << error.what() << "\n";
    return kExitRuntime;
  }
}

}  // namespace ptrain::app
