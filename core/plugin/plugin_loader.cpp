#include "core/plugin/plugin_loader.h"

#include "core/plugin/library_checks.h"
#include "ptrain/sdk/errors.h"
#include "ptrain/sdk/reward_plugin.h"

#include <boost/dll/shared_library.hpp>
#include <openssl/evp.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

namespace ptrain::plugin {
namespace fs = std::filesystem;

namespace {

std::string quoted(const fs::path& path) { return "'" + path.string() + "'"; }

bool world_writable(const fs::path& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && (info.st_mode & S_IWOTH) != 0;
}

fs::path executable_dir() {
  std::error_code error;
  const fs::path self = fs::read_symlink("/proc/self/exe", error);
  return error ? fs::path() : self.parent_path();
}

// Where this ptrain's SDK package lives, for the rebuild instruction: the
// prefix the executable was installed (or built) under.
std::string rebuild_hint() {
  const fs::path exe_dir = executable_dir();
  if (exe_dir.empty()) return "";
  return " (find_package(ptrain " + std::to_string(PTRAIN_SDK_VERSION_MAJOR) + "." +
         std::to_string(PTRAIN_SDK_VERSION_MINOR) +
         ") with -DCMAKE_PREFIX_PATH=" + exe_dir.parent_path().lexically_normal().string() + ")";
}

}  // namespace

namespace detail {

bool is_library_path(const std::string& name_or_path) {
  return name_or_path.find('/') != std::string::npos ||
         (name_or_path.size() > 3 && name_or_path.compare(name_or_path.size() - 3, 3, ".so") == 0);
}

// A library anyone can replace is code anyone can run in this process, so the
// file and the directory holding it must not be world-writable. Checked on
// the resolved path, before the library is opened.
fs::path trusted_library_file(const fs::path& path, std::string_view kind) {
  const std::string noun(kind);
  std::error_code exists_error;
  if (!fs::is_regular_file(path, exists_error)) {
    throw sdk::PluginError(path.string() + ": " + noun + " file does not exist");
  }
  const fs::path resolved = fs::canonical(path);
  if (world_writable(resolved)) {
    throw sdk::PluginError(path.string() + ": refusing to load a world-writable " + noun + " file (" +
                           resolved.string() + "); chmod o-w it");
  }
  if (world_writable(resolved.parent_path())) {
    throw sdk::PluginError(path.string() + ": refusing to load a " + noun + " from the world-writable directory " +
                           quoted(resolved.parent_path()) + "; move it to a directory only its owner can write");
  }
  return resolved;
}

std::shared_ptr<boost::dll::shared_library> open_library(const fs::path& given, const fs::path& resolved) {
  auto library = std::make_shared<boost::dll::shared_library>();
  boost::dll::fs::error_code load_error;
  // rtld_local keeps one plugin's symbols from resolving another's.
  library->load(resolved, boost::dll::load_mode::rtld_lazy | boost::dll::load_mode::rtld_local, load_error);
  if (load_error) {
    throw sdk::PluginError(given.string() + ": cannot load library: " + load_error.message());
  }
  return library;
}

void check_entry_versions(const fs::path& given, std::string_view kind, uint32_t abi_version,
                          const char* torch_version) {
  const std::string noun(kind);
  if (abi_version != sdk::kAbiVersion) {
    throw sdk::PluginError(given.string() + ": " + noun + " built for SDK ABI version " + std::to_string(abi_version) +
                           ", this ptrain supports ABI version " + std::to_string(sdk::kAbiVersion) + "; rebuild the " +
                           noun + " against SDK " + sdk::kSdkVersion + rebuild_hint());
  }
  const std::string host_torch = PTRAIN_TORCH_VERSION;
  if (torch_version == nullptr || host_torch != torch_version) {
    throw sdk::PluginError(given.string() + ": " + noun + " built with LibTorch " +
                           (torch_version ? torch_version : "(unknown)") + ", this ptrain uses LibTorch " + host_torch +
                           "; rebuild the " + noun + " against the same LibTorch");
  }
}

fs::path find_library_file(const std::string& name, const std::string& file_name,
                           const std::vector<fs::path>& search_dirs, std::string_view kind, std::string_view hint) {
  std::string looked_in;
  for (const fs::path& dir : search_dirs) {
    const fs::path candidate = dir / file_name;
    if (fs::exists(candidate)) {
      // A symlink may point elsewhere only within the directory searched.
      const fs::path real_dir = fs::canonical(dir);
      const fs::path target = fs::canonical(candidate);
      const fs::path inside = target.lexically_relative(real_dir);
      if (inside.empty() || *inside.begin() == "..") {
        throw sdk::PluginError(candidate.string() + ": refusing to load: it resolves to " + target.string() +
                               ", outside the plugin directory " + quoted(real_dir));
      }
      return candidate;
    }
    looked_in += (looked_in.empty() ? "" : ", ") + quoted(dir);
  }
  throw sdk::ConfigError(std::string(kind) + " '" + name + "' not found: no " + file_name + " in " + looked_in + " (" +
                         std::string(hint) + ")");
}

std::string sha256_of_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw sdk::PluginError(path.string() + ": cannot read plugin file");
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(context.get(), EVP_sha256(), nullptr);
  std::vector<char> buffer(1 << 16);
  while (in.read(buffer.data(), static_cast<std::streamsize>(buffer.size())) || in.gcount() > 0) {
    EVP_DigestUpdate(context.get(), buffer.data(), static_cast<size_t>(in.gcount()));
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(context.get(), digest, &length);
  static const char* kHex = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  return hex;
}

void rethrow_as_host_error(const std::string& context) {
  try {
    throw;
  } catch (const sdk::DataError& error) {
    throw sdk::DataError(error.what());
  } catch (const sdk::ConfigError& error) {
    throw sdk::ConfigError(error.what());
  } catch (const std::exception& error) {
    throw sdk::PluginError(context + error.what());
  } catch (...) {
    throw sdk::PluginError(context + "an exception that is not a std::exception");
  }
}

}  // namespace detail

std::string plugin_file_name(const std::string& name) { return "libptrain_plugin_" + name + ".so"; }

std::vector<fs::path> plugin_search_dirs(const std::vector<fs::path>& extra_dirs) {
  std::vector<fs::path> dirs = extra_dirs;
  // A build tree has the install layout (bin/, lib/ptrain/plugins/); an
  // install puts plugins under its own libdir, which differs on multiarch
  // prefixes (duplicates are dropped below).
  if (const fs::path exe_dir = executable_dir(); !exe_dir.empty()) {
    dirs.push_back(exe_dir.parent_path() / "lib" / "ptrain" / "plugins");
    dirs.push_back(exe_dir.parent_path() / PTRAIN_INSTALL_LIBDIR / "ptrain" / "plugins");
  }
  if (const char* env = std::getenv("PTRAIN_PLUGIN_PATH"); env != nullptr) {
    std::stringstream entries(env);
    std::string entry;
    while (std::getline(entries, entry, ':')) {
      if (!entry.empty()) dirs.emplace_back(entry);
    }
  }
  std::vector<fs::path> unique;
  for (const fs::path& dir : dirs) {
    const fs::path normal = dir.lexically_normal();
    if (std::find(unique.begin(), unique.end(), normal) == unique.end()) unique.push_back(normal);
  }
  return unique;
}

sdk::ConfigSchema LoadedPlugin::config_schema() const {
  sdk::ConfigSchema schema;
  if (info_->declare_config != nullptr) info_->declare_config(schema);
  return schema;
}

ModuleHandle LoadedPlugin::create_module() const {
  std::unique_ptr<sdk::TrainModule> module(info_->create());
  if (!module) throw sdk::PluginError(path_.string() + ": plugin '" + info_->name + "' returned no module");
  return ModuleHandle(library_, std::move(module));
}

LoadedPlugin load_plugin_file(const fs::path& path) {
  // The resolved file is what gets checked, hashed and opened.
  const fs::path resolved = detail::trusted_library_file(path, "plugin");
  std::shared_ptr<boost::dll::shared_library> library = detail::open_library(path, resolved);
  if (!library->has(sdk::kPluginEntrySymbol)) {
    std::string hint;
    if (library->has(sdk::kRewardPluginEntrySymbol))
      hint = "; it is a reward library: list it in module.reward_plugins";
    throw sdk::PluginError(path.string() + ": not a ptrain plugin (no '" + sdk::kPluginEntrySymbol + "' entry point)" +
                           hint);
  }
  const auto entry = library->get<const sdk::PluginInfo*()>(sdk::kPluginEntrySymbol);
  const sdk::PluginInfo* info = entry();
  if (info == nullptr) throw sdk::PluginError(path.string() + ": plugin entry returned nothing");

  // Only the two frozen leading fields may be read before these checks pass.
  detail::check_entry_versions(path, "plugin", info->abi_version, info->torch_version);
  if (info->name == nullptr || info->create == nullptr) {
    throw sdk::PluginError(path.string() + ": plugin entry lacks a name or a factory");
  }
  LoadedPlugin plugin;
  plugin.library_ = std::move(library);
  plugin.info_ = info;
  plugin.path_ = path;
  plugin.resolved_path_ = resolved;
  plugin.sha256_ = detail::sha256_of_file(resolved);
  return plugin;
}

LoadedPlugin load_plugin(const std::string& name_or_path, const std::vector<fs::path>& search_dirs) {
  if (detail::is_library_path(name_or_path)) return load_plugin_file(name_or_path);
  const fs::path candidate = detail::find_library_file(
      name_or_path, plugin_file_name(name_or_path), search_dirs, "plugin",
      "set PTRAIN_PLUGIN_PATH or give a path to the .so; `ptrain plugins` lists what is found");
  LoadedPlugin plugin = load_plugin_file(candidate);
  if (plugin.info().name != name_or_path) {
    throw sdk::PluginError(candidate.string() + ": file is named for plugin '" + name_or_path +
                           "' but the library calls itself '" + plugin.info().name + "'");
  }
  return plugin;
}

std::vector<PluginListing> list_plugins(const std::vector<fs::path>& search_dirs) {
  std::vector<PluginListing> listings;
  std::set<fs::path> seen;
  for (const fs::path& dir : search_dirs) {
    std::error_code error;
    if (!fs::is_directory(dir, error)) continue;
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(dir, error)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("libptrain_plugin_", 0) == 0 && entry.path().extension() == ".so") files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& file : files) {
      const fs::path canonical = fs::weakly_canonical(file, error);
      if (!seen.insert(canonical).second) continue;
      PluginListing listing;
      listing.path = file;
      try {
        const LoadedPlugin plugin = load_plugin_file(file);
        listing.ok = true;
        listing.name = plugin.info().name;
        listing.version = plugin.info().version ? plugin.info().version : "";
        listing.description = plugin.info().description ? plugin.info().description : "";
        listing.torch_version = plugin.info().torch_version;
        listing.abi_version = plugin.info().abi_version;
      } catch (const sdk::Error& failure) {
        listing.error = failure.what();
      }
      listings.push_back(std::move(listing));
    }
  }
  return listings;
}

}  // namespace ptrain::plugin
