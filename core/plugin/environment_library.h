// Loads environment libraries (sdk/environment_plugin.h) for
// Context::open_environment, with the checks of plugin_loader: trusted file,
// matching ABI and LibTorch, and the environment and its episodes tied to the
// library handle.
#pragma once

#include "ptrain/sdk/environment.h"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace ptrain::plugin {

// The file name an environment library called `name` is built as: libptrain_env_<name>.so.
std::string environment_library_file_name(const std::string& name);

// `name_or_path` is a path if it contains '/' or ends in ".so", else a name
// looked up in `search_dirs` (plugin_search_dirs), whose library must call
// itself `name`. Returns the library's environment. Throws sdk::PluginError
// naming the path and the reason: missing or world-writable file, not
// loadable, no environment entry point (an algorithm plugin or a reward
// library is named as such), another SDK ABI or LibTorch version (naming
// both), an entry without a name or factory, a factory that returns nothing.
// sdk::ConfigError: a name not found.
std::unique_ptr<sdk::Environment> load_environment(const std::string& name_or_path,
                                                   const std::vector<std::filesystem::path>& search_dirs);

}  // namespace ptrain::plugin
