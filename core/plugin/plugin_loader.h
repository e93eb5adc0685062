// Finds and loads plugin libraries (Boost.DLL) and checks their entry before
// running any of their code beyond it.
#pragma once

#include "ptrain/sdk/plugin.h"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace ptrain::plugin {

// A module tied to the library that made it: the module is destroyed first,
// and the library stays loaded while anything it created is alive.
class ModuleHandle {
 public:
  ModuleHandle(std::shared_ptr<void> library, std::unique_ptr<sdk::TrainModule> module)
      : library_(std::move(library)), module_(std::move(module)) {}
  ModuleHandle(ModuleHandle&&) = default;
  ModuleHandle& operator=(ModuleHandle&&) = default;
  ~ModuleHandle() { module_.reset(); }

  sdk::TrainModule& operator*() const { return *module_; }
  sdk::TrainModule* operator->() const { return module_.get(); }

 private:
  std::shared_ptr<void> library_;  // declared first: destroyed last
  std::unique_ptr<sdk::TrainModule> module_;
};

class LoadedPlugin {
 public:
  const std::filesystem::path& path() const { return path_; }
  // The file actually opened (symlinks resolved) and its SHA-256, in hex.
  const std::filesystem::path& resolved_path() const { return resolved_path_; }
  const std::string& sha256() const { return sha256_; }
  const sdk::PluginInfo& info() const { return *info_; }
  sdk::ConfigSchema config_schema() const;
  ModuleHandle create_module() const;

 private:
  friend LoadedPlugin load_plugin_file(const std::filesystem::path& path);
  std::shared_ptr<void> library_;  // the boost::dll::shared_library, kept loaded
  const sdk::PluginInfo* info_ = nullptr;
  std::filesystem::path path_;
  std::filesystem::path resolved_path_;
  std::string sha256_;
};

// The directories searched for a plugin given by name, in order: extra_dirs,
// <dir of the executable>/../lib/ptrain/plugins (the installed plugins, or the
// built ones in a build tree, which has the same layout), then each entry of
// PTRAIN_PLUGIN_PATH (':'-separated).
std::vector<std::filesystem::path> plugin_search_dirs(const std::vector<std::filesystem::path>& extra_dirs);

// The file name a plugin called `name` is built as: libptrain_plugin_<name>.so.
std::string plugin_file_name(const std::string& name);

// Loads a library and checks its entry. Throws sdk::PluginError naming the
// path: missing file, a world-writable file or directory (refused before the
// library is opened), unloadable library, no ptrain entry point, or an SDK ABI
// or LibTorch version that differs from the host's (naming both, and the SDK
// version and prefix to rebuild against).
LoadedPlugin load_plugin_file(const std::filesystem::path& path);

// `name_or_path` is a path if it contains '/' or ends in ".so", else a plugin
// name looked up in `search_dirs`; there, a symlink resolving outside its
// directory is refused.
LoadedPlugin load_plugin(const std::string& name_or_path, const std::vector<std::filesystem::path>& search_dirs);

struct PluginListing {
  std::filesystem::path path;
  bool ok = false;
  std::string name, version, torch_version, description, error;
  uint32_t abi_version = 0;
};

// Every *.so in the search dirs that looks like a plugin, loadable or not.
std::vector<PluginListing> list_plugins(const std::vector<std::filesystem::path>& search_dirs);

}  // namespace ptrain::plugin
