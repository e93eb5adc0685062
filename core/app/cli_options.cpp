#include "core/app/cli_options.h"

#include "ptrain/sdk/errors.h"

#include <iostream>

namespace ptrain::app {
namespace po = boost::program_options;

void add_help_option(po::options_description& options) { options.add_options()("help,h", "show this help"); }

po::options_description config_options() {
  po::options_description options("config options");
  po::options_description_easy_init add = options.add_options();
  add("config,c", po::value<std::string>()->required(), "TOML config file");
  add("set", po::value<std::vector<std::string>>()->composing(),
      "override a config key, e.g. --set optim.lr=3e-4 (repeatable)");
  add("plugin-dir", po::value<std::vector<std::string>>()->composing(),
      "also search this directory for plugins, before the default ones (repeatable)");
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

bool parse_command(const std::string& command, const std::string& usage, po::options_description& options,
                   const std::vector<std::string>& arguments, po::variables_map& values) {
  add_help_option(options);
  po::store(po::command_line_parser(arguments).options(options).run(), values);
  if (values.count("help")) {
    std::cout << "usage: ptrain " << command << " " << usage << "\n\n" << options << "\n";
    return false;
  }
  try {
    po::notify(values);
  } catch (const po::error& error) {
    throw sdk::UsageError(std::string(error.what()) + " (see: ptrain " + command + " --help)");
  }
  return true;
}

}  // namespace ptrain::app
