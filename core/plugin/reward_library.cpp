#include "core/plugin/reward_library.h"

#include "core/log/logger.h"
#include "core/plugin/library_checks.h"
#include "core/rewards/reward_spec.h"
#include "ptrain/sdk/errors.h"
#include "ptrain/sdk/reward_plugin.h"

#include <set>

namespace ptrain::plugin {
namespace fs = std::filesystem;

namespace {

// A function a reward library made, held with the library so that the
// library is unloaded only after the function is destroyed. Its vtable is the
// host's; an exception from the library's code is replaced by the host's own
// of the same kind, since one thrown there may be caught after the library is
// gone (Boost.DLL's documented hazard).
class LibraryRewardFunction final : public sdk::RewardFunction {
 public:
  LibraryRewardFunction(std::shared_ptr<void> library, std::unique_ptr<sdk::RewardFunction> function, std::string name,
                        std::string library_path)
      : library_(std::move(library)),
        function_(std::move(function)),
        name_(std::move(name)),
        library_path_(std::move(library_path)) {}
  ~LibraryRewardFunction() override { function_.reset(); }

  std::string name() const override { return name_; }

  std::vector<double> score(const std::vector<sdk::RewardInput>& inputs) override {
    try {
      return function_->score(inputs);
    } catch (...) {
      detail::rethrow_as_host_error(context());
    }
  }

 private:
  std::string context() const { return library_path_ + ": reward function '" + name_ + "' failed: "; }

  std::shared_ptr<void> library_;  // declared first: released last
  std::unique_ptr<sdk::RewardFunction> function_;
  std::string name_;
  std::string library_path_;
};

class LoadedRewardLibrary final : public sdk::RewardLibrary {
 public:
  LoadedRewardLibrary(std::shared_ptr<boost::dll::shared_library> library, const sdk::RewardPluginInfo* info,
                      fs::path resolved)
      : library_(std::move(library)), info_(info), resolved_(std::move(resolved)) {}

  std::string name() const override { return info_->name; }
  std::string path() const override { return resolved_.string(); }

  std::vector<std::string> function_names() const override {
    std::vector<std::string> names;
    for (uint64_t i = 0; i < info_->num_functions; ++i) names.emplace_back(info_->functions[i].name);
    return names;
  }

  std::unique_ptr<sdk::RewardFunction> create(const std::string& function_name) const override {
    for (uint64_t i = 0; i < info_->num_functions; ++i) {
      const sdk::RewardFunctionEntry& entry = info_->functions[i];
      if (function_name != entry.name) continue;
      std::unique_ptr<sdk::RewardFunction> function(entry.create());
      if (!function) {
        throw sdk::PluginError(path() + ": reward function '" + function_name + "' returned no object");
      }
      return std::make_unique<LibraryRewardFunction>(library_, std::move(function), function_name, path());
    }
    std::string offered;
    for (const std::string& name : function_names()) offered += (offered.empty() ? "" : ", ") + name;
    throw sdk::ConfigError(path() + ": reward library '" + name() + "' has no function '" + function_name +
                           "'; it offers " + offered);
  }

 private:
  std::shared_ptr<boost::dll::shared_library> library_;
  const sdk::RewardPluginInfo* info_;
  fs::path resolved_;
};

std::unique_ptr<LoadedRewardLibrary> load_reward_library_file(const fs::path& path) {
  const std::string kind = "reward library";
  const fs::path resolved = detail::trusted_library_file(path, kind);
  std::shared_ptr<boost::dll::shared_library> library = detail::open_library(path, resolved);
  if (!library->has(sdk::kRewardPluginEntrySymbol)) {
    std::string hint;
    if (library->has(sdk::kPluginEntrySymbol)) hint = "; it is an algorithm plugin: name it in `plugin =`";
    throw sdk::PluginError(path.string() + ": not a ptrain reward library (no '" + sdk::kRewardPluginEntrySymbol +
                           "' entry point)" + hint);
  }
  const auto entry = library->get<const sdk::RewardPluginInfo*()>(sdk::kRewardPluginEntrySymbol);
  const sdk::RewardPluginInfo* info = entry();
  if (info == nullptr) throw sdk::PluginError(path.string() + ": reward library entry returned nothing");

  // Only the two frozen leading fields may be read before these checks pass.
  detail::check_entry_versions(path, kind, info->abi_version, info->torch_version);
  if (info->name == nullptr || info->functions == nullptr || info->num_functions == 0) {
    throw sdk::PluginError(path.string() + ": reward library entry lacks a name or functions");
  }
  std::set<std::string> names;
  for (uint64_t i = 0; i < info->num_functions; ++i) {
    const sdk::RewardFunctionEntry& function = info->functions[i];
    if (function.name == nullptr || *function.name == '\0' || function.create == nullptr) {
      throw sdk::PluginError(path.string() + ": reward function #" + std::to_string(i + 1) +
                             " of the library's entry lacks a name or a factory");
    }
    if (!names.insert(function.name).second) {
      throw sdk::PluginError(path.string() + ": the library offers two reward functions named '" + function.name + "'");
    }
  }
  log::info("plugin", "loaded reward library " + std::string(info->name) + " from " + resolved.string() + " (sha256 " +
                          detail::sha256_of_file(resolved) + ")");
  return std::make_unique<LoadedRewardLibrary>(std::move(library), info, resolved);
}

}  // namespace

std::string reward_library_file_name(const std::string& name) { return "libptrain_reward_" + name + ".so"; }

std::unique_ptr<sdk::RewardLibrary> load_reward_library(const std::string& name_or_path,
                                                        const std::vector<fs::path>& search_dirs) {
  if (rewards::is_reward_source_spec(name_or_path)) return rewards::open_reward_source(name_or_path);
  if (detail::is_library_path(name_or_path)) return load_reward_library_file(name_or_path);
  const fs::path candidate =
      detail::find_library_file(name_or_path, reward_library_file_name(name_or_path), search_dirs, "reward library",
                                "set PTRAIN_PLUGIN_PATH or give a path to the .so");
  std::unique_ptr<LoadedRewardLibrary> library = load_reward_library_file(candidate);
  if (library->name() != name_or_path) {
    throw sdk::PluginError(candidate.string() + ": file is named for reward library '" + name_or_path +
                           "' but the library calls itself '" + library->name() + "'");
  }
  return library;
}

}  // namespace ptrain::plugin
