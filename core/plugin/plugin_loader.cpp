#include "core/plugin/plugin_loader.h"

#include "ptrain/sdk/errors.h"

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

// A library anyone can replace is code anyone can run in this process, so the
// file and the directory holding it must not be world-writable. Checked on
// the resolved path, before the library is opened.
void check_not_world_writable(const fs::path& given, const fs::path& resolved) {
  if (world_writable(resolved)) {
    throw sdk::PluginError(given.string() + ": refusing to load a world-writable plugin file (" + resolved.string() +
                           "); chmod o-w it");
  }
  if (world_writable(resolved.parent_path())) {
    throw sdk::PluginError(given.string() + ": refusing to load a plugin from the world-writable directory " +
                           quoted(resolved.parent_path()) + "; move it to a directory only its owner can write");
  }
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
  std::error_code exists_error;
  if (!fs::is_regular_file(path, exists_error)) {
    throw sdk::PluginError(path.string() + ": plugin file does not exist");
  }
  // The resolved file is what gets checked, hashed and opened.
  const fs::path resolved = fs::canonical(path);
  check_not_world_writable(path, resolved);
  auto library = std::make_shared<boost::dll::shared_library>();
  boost::dll::fs::error_code load_error;
  // rtld_local keeps one plugin's symbols from resolving another's.
  library->load(resolved, boost::dll::load_mode::rtld_lazy | boost::dll::load_mode::rtld_local, load_error);
  if (load_error) {
    throw sdk::PluginError(path.string() + ": cannot load library: " + load_error.message());
  }
  if (!library->has(sdk::kPluginEntrySymbol)) {
    throw sdk::PluginError(path.string() + ": not a ptrain plugin (no '" + sdk::kPluginEntrySymbol + "' entry point)");
  }
  const auto entry = library->get<const sdk::PluginInfo*()>(sdk::kPluginEntrySymbol);
  const sdk::PluginInfo* info = entry();
  if (info == nullptr) throw sdk::PluginError(path.string() + ": plugin entry returned nothing");

  // Only the two frozen leading fields may be read before these checks pass.
  if (info->abi_version != sdk::kAbiVersion) {
    throw sdk::PluginError(path.string() + ": plugin built for SDK ABI version " + std::to_string(info->abi_version) +
                           ", this ptrain supports ABI version " + std::to_string(sdk::kAbiVersion) +
                           "; rebuild the plugin against SDK " + sdk::kSdkVersion + rebuild_hint());
  }
  const std::string host_torch = PTRAIN_TORCH_VERSION;
  if (info->torch_version == nullptr || host_torch != info->torch_version) {
    throw sdk::PluginError(path.string() + ": plugin built with LibTorch " +
                           (info->torch_version ? info->torch_version : "(unknown)") + ", this ptrain uses LibTorch " +
                           host_torch + "; rebuild the plugin against the same LibTorch");
  }
  if (info->name == nullptr || info->create == nullptr) {
    throw sdk::PluginError(path.string() + ": plugin entry lacks a name or a factory");
  }
  LoadedPlugin plugin;
  plugin.library_ = std::move(library);
  plugin.info_ = info;
  plugin.path_ = path;
  plugin.resolved_path_ = resolved;
  plugin.sha256_ = sha256_of_file(resolved);
  return plugin;
}

LoadedPlugin load_plugin(const std::string& name_or_path, const std::vector<fs::path>& search_dirs) {
  const bool is_path = name_or_path.find('/') != std::string::npos ||
                       (name_or_path.size() > 3 && name_or_path.compare(name_or_path.size() - 3, 3, ".so") == 0);
  if (is_path) return load_plugin_file(name_or_path);

  const std::string file_name = plugin_file_name(name_or_path);
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
      LoadedPlugin plugin = load_plugin_file(candidate);
      if (plugin.info().name != name_or_path) {
        throw sdk::PluginError(candidate.string() + ": file is named for plugin '" + name_or_path +
                               "' but the library calls itself '" + plugin.info().name + "'");
      }
      return plugin;
    }
    looked_in += (looked_in.empty() ? "" : ", ") + quoted(dir);
  }
  throw sdk::ConfigError("plugin '" + name_or_path + "' not found: no " + file_name + " in " + looked_in +
                         " (set PTRAIN_PLUGIN_PATH or give a path to the .so; `ptrain plugins` lists what is found)");
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
