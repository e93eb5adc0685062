#include "core/app/cli.h"

#include "core/app/commands.h"
#include "ptrain/sdk/errors.h"
#include "ptrain/sdk/plugin.h"

#include <boost/program_options.hpp>
#include <c10/util/Exception.h>

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
    "  plugins    list the plugins found on the plugin search path\n"
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
    std::cout << "ptrain " << PTRAIN_VERSION << " (SDK ABI " << sdk::kAbiVersion << ", LibTorch "
              << PTRAIN_TORCH_VERSION << ")\n";
    return kExitOk;
  }
  const std::string command = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  po::variables_map values;

  if (command == "train") {
    po::options_description options = config_options();
    options.add_options()("overwrite", "replace an existing run in output_dir");
    if (!parse_command(command, "-c FILE [--set key=value]... [--overwrite]", options, rest, values)) return kExitOk;
    return command_train(config_options_from(values), values.count("overwrite") > 0);
  }
  if (command == "validate") {
    if (!parse_command(command, "-c FILE [--set key=value]...", config_options(), rest, values)) return kExitOk;
    return command_validate(config_options_from(values));
  }
  if (command == "plugins") {
    po::options_description options("options");
    options.add_options()("plugin-dir", po::value<std::vector<std::string>>()->composing(),
                          "also search this directory (repeatable)");
    if (!parse_command(command, "[--plugin-dir DIR]...", options, rest, values)) return kExitOk;
    return command_plugins(plugin_dirs_from(values));
  }
  throw sdk::UsageError("unknown command '" + command + "' (commands: train, validate, plugins; see ptrain --help)");
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
