// Libraries that are not usable plugins, and plugins ptrain must not trust:
// each a PluginError (ConfigError for a name not found) naming the path,
// refused before the library is opened where trust is the problem.
#include "catch.h"

#include "bad_inputs/rejection.h"
#include "support/run_command.h"
#include "support/test_util.h"

#include "core/plugin/plugin_loader.h"
#include "ptrain/sdk/plugin.h"

#include <sys/stat.h>

#include <filesystem>
#include <string>

using namespace ptrain;
namespace fs = std::filesystem;

namespace {

const fs::path kFixtures = PTRAIN_TEST_PLUGIN_DIR;
const fs::path kSftPlugin = PTRAIN_SFT_PLUGIN_PATH;

// A private copy of the SFT plugin, as `name`, in a fresh directory only its owner can write.
fs::path copy_sft_plugin(const std::string& dir_name, const std::string& name = "libptrain_plugin_sft.so") {
  const fs::path dir = testing::fresh_test_dir(dir_name);
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
  fs::copy_file(kSftPlugin, dir / name);
  return dir / name;
}

}  // namespace

TEST_CASE("unusable libraries are refused naming the path and the versions", "[bad_inputs][plugin]") {
  const fs::path missing = kFixtures / "libptrain_plugin_nothing_here.so";
  testing::check_rejected([&] { plugin::load_plugin(missing.string(), {}); }, "PluginError",
                          missing.string() + ": plugin file does not exist");

  const fs::path not_plugin = kFixtures / "libnot_a_plugin.so";
  testing::check_rejected([&] { plugin::load_plugin(not_plugin.string(), {}); }, "PluginError",
                          not_plugin.string() + ": not a ptrain plugin (no 'ptrain_plugin_info' entry point)");

  const fs::path abi = kFixtures / "libptrain_plugin_abi_mismatch.so";
  testing::check_rejected([&] { plugin::load_plugin(abi.string(), {}); }, "PluginError",
                          abi.string() + ": plugin built for SDK ABI version " +
                              std::to_string(sdk::kAbiVersion + 1000) + ", this ptrain supports ABI version " +
                              std::to_string(sdk::kAbiVersion) + "; rebuild the plugin against SDK " + sdk::kSdkVersion +
                              " (find_package(ptrain " + std::to_string(PTRAIN_SDK_VERSION_MAJOR) + "." +
                              std::to_string(PTRAIN_SDK_VERSION_MINOR) + ") with -DCMAKE_PREFIX_PATH=");

  const fs::path torch = kFixtures / "libptrain_plugin_torch_mismatch.so";
  testing::check_rejected([&] { plugin::load_plugin(torch.string(), {}); }, "PluginError",
                          torch.string() + ": plugin built with LibTorch 0.1, this ptrain uses LibTorch " +
                              PTRAIN_TORCH_VERSION + "; rebuild the plugin against the same LibTorch");

  const fs::path garbage = testing::write_text_file(testing::fresh_test_dir("bad_plugin"), "garbage.so", "not an ELF");
  testing::check_rejected([&] { plugin::load_plugin(garbage.string(), {}); }, "PluginError",
                          garbage.string() + ": cannot load library");

  const fs::path directory = testing::fresh_test_dir("bad_plugin_dir") / "libptrain_plugin_dir.so";
  fs::create_directories(directory);
  testing::check_rejected([&] { plugin::load_plugin(directory.string(), {}); }, "PluginError",
                          directory.string() + ": plugin file does not exist");

  testing::check_rejected(
      [&] { plugin::load_plugin("no_such_plugin", {kFixtures}); }, "ConfigError",
      "plugin 'no_such_plugin' not found: no libptrain_plugin_no_such_plugin.so in '" + kFixtures.string() + "'");

  const fs::path renamed = copy_sft_plugin("bad_plugin_renamed", "libptrain_plugin_other.so");
  testing::check_rejected([&] { plugin::load_plugin("other", {renamed.parent_path()}); }, "PluginError",
                          renamed.string() + ": file is named for plugin 'other' but the library calls itself 'sft'");
}

TEST_CASE("world-writable plugins and symlinks out of the plugin dir are refused", "[bad_inputs][plugin]") {
  SECTION("a world-writable file") {
    const fs::path file = copy_sft_plugin("trust_file");
    fs::permissions(file, fs::perms::others_write, fs::perm_options::add);
    testing::check_rejected([&] { plugin::load_plugin(file.string(), {}); }, "PluginError",
                            file.string() + ": refusing to load a world-writable plugin file");
    testing::check_rejected([&] { plugin::load_plugin("sft", {file.parent_path()}); }, "PluginError",
                            file.string() + ": refusing to load a world-writable plugin file");
  }
  SECTION("a world-writable directory") {
    const fs::path file = copy_sft_plugin("trust_dir");
    fs::permissions(file.parent_path(), fs::perms::all);
    testing::check_rejected([&] { plugin::load_plugin(file.string(), {}); }, "PluginError",
                            file.string() + ": refusing to load a plugin from the world-writable directory '" +
                                file.parent_path().string() + "'");
  }
  SECTION("a symlink leaving the plugin directory") {
    const fs::path outside = copy_sft_plugin("trust_outside", "libreal.so");
    const fs::path dir = testing::fresh_test_dir("trust_link");
    fs::create_symlink(outside, dir / "libptrain_plugin_sft.so");
    testing::check_rejected([&] { plugin::load_plugin("sft", {dir}); }, "PluginError",
                            (dir / "libptrain_plugin_sft.so").string() + ": refusing to load: it resolves to " +
                                outside.string() + ", outside the plugin directory");
  }
  SECTION("a symlink within the plugin directory loads, reporting the file it opened") {
    const fs::path real = copy_sft_plugin("trust_inside", "libsft_v2.so");
    fs::create_symlink("libsft_v2.so", real.parent_path() / "libptrain_plugin_sft.so");
    const plugin::LoadedPlugin loaded = plugin::load_plugin("sft", {real.parent_path()});
    CHECK(std::string(loaded.info().name) == "sft");
    CHECK(loaded.resolved_path() == fs::canonical(real));
  }
}

TEST_CASE("a loaded plugin reports the SHA-256 of the file it opened", "[bad_inputs][plugin]") {
  const plugin::LoadedPlugin loaded = plugin::load_plugin(kSftPlugin.string(), {});
  // An independent digest: coreutils' sha256sum.
  const testing::CommandResult digest = testing::run_command("sha256sum '" + kSftPlugin.string() + "'");
  REQUIRE(digest.exit_code == 0);
  CHECK(loaded.sha256() == digest.output.substr(0, 64));
  CHECK(loaded.resolved_path() == fs::canonical(kSftPlugin));
}
