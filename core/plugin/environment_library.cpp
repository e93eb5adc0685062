#include "core/plugin/environment_library.h"

#include "core/log/logger.h"
#include "core/plugin/library_checks.h"
#include "ptrain/sdk/environment_plugin.h"
#include "ptrain/sdk/errors.h"
#include "ptrain/sdk/reward_plugin.h"

namespace ptrain::plugin {
namespace fs = std::filesystem;

namespace {

using Library = std::shared_ptr<boost::dll::shared_library>;

// An episode the library's environment started, held with the library: its
// vtable and destructor live there, so the library is unloaded only after it
// is destroyed; its exceptions become the host's (library_checks.h).
class LibraryEpisode final : public sdk::Episode {
 public:
  LibraryEpisode(Library library, std::unique_ptr<sdk::Episode> episode, std::string context)
      : library_(std::move(library)), episode_(std::move(episode)), context_(std::move(context)) {}
  ~LibraryEpisode() override { episode_.reset(); }

  sdk::EnvironmentReply step(const sdk::AssistantTurn& turn) override {
    try {
      return episode_->step(turn);
    } catch (...) {
      detail::rethrow_as_host_error(context_ + "an episode's step failed: ");
    }
  }
  double unfinished_reward() override {
    try {
      return episode_->unfinished_reward();
    } catch (...) {
      detail::rethrow_as_host_error(context_ + "an episode's unfinished_reward failed: ");
    }
  }

 private:
  Library library_;  // declared first: released last
  std::unique_ptr<sdk::Episode> episode_;
  std::string context_;
};

class LibraryEnvironment final : public sdk::Environment {
 public:
  LibraryEnvironment(Library library, std::unique_ptr<sdk::Environment> environment, std::string context)
      : library_(std::move(library)), environment_(std::move(environment)), context_(std::move(context)) {}
  ~LibraryEnvironment() override { environment_.reset(); }

  std::string name() const override { return environment_->name(); }

  std::unique_ptr<sdk::Episode> start(const sdk::Example& example) override {
    std::unique_ptr<sdk::Episode> episode;
    try {
      episode = environment_->start(example);
    } catch (...) {
      detail::rethrow_as_host_error(context_ + "start failed: ");
    }
    if (!episode) throw sdk::PluginError(context_ + "start returned no episode for " + example.location);
    return std::make_unique<LibraryEpisode>(library_, std::move(episode), context_);
  }

 private:
  Library library_;  // declared first: released last
  std::unique_ptr<sdk::Environment> environment_;
  std::string context_;
};

// The checked entry of an environment library, and the resolved file it came from.
const sdk::EnvironmentPluginInfo* checked_entry(const fs::path& path, const Library& library) {
  if (!library->has(sdk::kEnvironmentPluginEntrySymbol)) {
    std::string hint;
    if (library->has(sdk::kPluginEntrySymbol)) hint = "; it is an algorithm plugin: name it in `plugin =`";
    if (library->has(sdk::kRewardPluginEntrySymbol)) {
      hint = "; it is a reward library: name it in module.reward_plugins";
    }
    throw sdk::PluginError(path.string() + ": not a ptrain environment library (no '" +
                           sdk::kEnvironmentPluginEntrySymbol + "' entry point)" + hint);
  }
  const auto entry = library->get<const sdk::EnvironmentPluginInfo*()>(sdk::kEnvironmentPluginEntrySymbol);
  const sdk::EnvironmentPluginInfo* info = entry();
  if (info == nullptr) throw sdk::PluginError(path.string() + ": environment library entry returned nothing");
  // Only the two frozen leading fields may be read before these checks pass.
  detail::check_entry_versions(path, "environment library", info->abi_version, info->torch_version);
  if (info->name == nullptr || *info->name == '\0' || info->create == nullptr) {
    throw sdk::PluginError(path.string() + ": environment library entry lacks a name or a factory");
  }
  return info;
}

std::unique_ptr<sdk::Environment> load_environment_file(const fs::path& path, const std::string& expected_name) {
  const fs::path resolved = detail::trusted_library_file(path, "environment library");
  Library library = detail::open_library(path, resolved);
  const sdk::EnvironmentPluginInfo* info = checked_entry(path, library);
  if (!expected_name.empty() && expected_name != info->name) {
    throw sdk::PluginError(path.string() + ": file is named for environment '" + expected_name +
                           "' but the library calls itself '" + info->name + "'");
  }
  const std::string context = resolved.string() + ": environment '" + info->name + "': ";
  std::unique_ptr<sdk::Environment> environment;
  try {
    environment.reset(info->create());
  } catch (...) {
    detail::rethrow_as_host_error(context + "create failed: ");
  }
  if (!environment) throw sdk::PluginError(context + "its factory returned no object");
  log::info("plugin", "loaded environment library " + std::string(info->name) + " from " + resolved.string() +
                          " (sha256 " + detail::sha256_of_file(resolved) + ")");
  return std::make_unique<LibraryEnvironment>(std::move(library), std::move(environment), context);
}

}  // namespace

std::string environment_library_file_name(const std::string& name) { return "libptrain_env_" + name + ".so"; }

std::unique_ptr<sdk::Environment> load_environment(const std::string& name_or_path,
                                                   const std::vector<fs::path>& search_dirs) {
  if (detail::is_library_path(name_or_path)) return load_environment_file(name_or_path, "");
  const fs::path candidate =
      detail::find_library_file(name_or_path, environment_library_file_name(name_or_path), search_dirs,
                                "environment library", "set PTRAIN_PLUGIN_PATH or give a path to the .so");
  return load_environment_file(candidate, name_or_path);
}

}  // namespace ptrain::plugin
