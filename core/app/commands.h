// The `ptrain` subcommands. Each returns the process exit code and throws
// sdk errors, which cli.cpp turns into one line and an exit code.
#pragma once

#include "core/dist/launcher.h"

#include <filesystem>
#include <string>
#include <vector>

namespace ptrain::app {

struct ConfigOptions {
  std::filesystem::path config_file;
  std::vector<std::string> overrides;  // "section.key=value"
  std::vector<std::filesystem::path> plugin_dirs;
};

// resume: "" (start fresh), "auto" (latest checkpoint in output_dir, if any) or a checkpoint path.
int command_train(const ConfigOptions& options, bool overwrite, const std::string& resume);
int command_validate(const ConfigOptions& options);
// The config reference (core sections, then each named plugin's [module]) as Markdown.
int command_schema(const std::vector<std::string>& plugin_names, const std::vector<std::filesystem::path>& plugin_dirs);
int command_launch(const dist::LaunchOptions& options);
int command_plugins(const std::vector<std::filesystem::path>& plugin_dirs);
// One plugin's [module] keys from the schema it exports: type, default, allowed values, doc.
int command_describe_plugin(const std::string& name_or_path, const std::vector<std::filesystem::path>& plugin_dirs);

}  // namespace ptrain::app
