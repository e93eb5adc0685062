// Loads reward libraries (sdk/reward_plugin.h) for Context::open_reward_library,
// with the checks of plugin_loader: trusted file, matching ABI and LibTorch,
// and every function it makes tied to the library handle.
#pragma once

#include "ptrain/sdk/rewards.h"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace ptrain::plugin {

// The file name a reward library called `name` is built as: libptrain_reward_<name>.so.
std::string reward_library_file_name(const std::string& name);

// `name_or_path` may also name a reward source that is not a library:
// "python:FILE.py" (its Python functions) or "http://host:port/path" (a
// reward server), opened by core/rewards (reward_spec.h), which throws
// sdk::ConfigError naming the file or URL.
//
// Otherwise `name_or_path` is a path if it contains '/' or ends in ".so", else a name
// looked up in `search_dirs` (plugin_search_dirs), whose library must call
// itself `name`. Throws sdk::PluginError naming the path and the reason:
// missing or world-writable file, not loadable, no reward entry point (an
// algorithm plugin is named as such), another SDK ABI or LibTorch version
// (naming both), an entry without functions, a function without a name or
// factory, two functions of one name. sdk::ConfigError: a name not found.
std::unique_ptr<sdk::RewardLibrary> load_reward_library(const std::string& name_or_path,
                                                        const std::vector<std::filesystem::path>& search_dirs);

}  // namespace ptrain::plugin
