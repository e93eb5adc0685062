// Loading the real SFT plugin, and refusing libraries that are not usable plugins.
#include "catch.h"

#include "core/plugin/plugin_loader.h"
#include "ptrain/sdk/errors.h"

#include <filesystem>
#include <fstream>
#include <memory>

using namespace ptrain;
namespace fs = std::filesystem;

namespace {

std::string load_error(const std::string& name_or_path, const std::vector<fs::path>& dirs = {}) {
  try {
    plugin::load_plugin(name_or_path, dirs);
  } catch (const sdk::Error& error) {
    return error.what();
  }
  return "(loaded)";
}

const fs::path kFixtures = PTRAIN_TEST_PLUGIN_DIR;

}  // namespace

TEST_CASE("the SFT plugin loads by path and by name, and creates a module with its schema") {
  const plugin::LoadedPlugin by_path = plugin::load_plugin(PTRAIN_SFT_PLUGIN_PATH, {});
  CHECK(std::string(by_path.info().name) == "sft");
  CHECK(by_path.info().abi_version == sdk::kAbiVersion);
  CHECK(std::string(by_path.info().torch_version) == PTRAIN_TORCH_VERSION);
  const sdk::ConfigSchema schema = by_path.config_schema();
  REQUIRE(schema.find("loss_agg") != nullptr);
  CHECK(schema.find("loss_agg")->choices.size() == 5);
  plugin::ModuleHandle module = by_path.create_module();
  CHECK(module->metric_specs().size() >= 3);

  const plugin::LoadedPlugin by_name = plugin::load_plugin("sft", {fs::path(PTRAIN_SFT_PLUGIN_PATH).parent_path()});
  CHECK(by_name.path() == fs::path(PTRAIN_SFT_PLUGIN_PATH));
}

TEST_CASE("a module outlives the LoadedPlugin it came from") {
  std::unique_ptr<plugin::ModuleHandle> module;
  {
    const plugin::LoadedPlugin loaded = plugin::load_plugin(PTRAIN_SFT_PLUGIN_PATH, {});
    module = std::make_unique<plugin::ModuleHandle>(loaded.create_module());
  }
  // The handle keeps the library loaded: calling into it must still work.
  CHECK((*module)->metric_specs().size() >= 3);
  module.reset();
}

TEST_CASE("unusable plugins give one-line errors naming the path and versions") {
  const fs::path missing = kFixtures / "libptrain_plugin_nothing_here.so";
  CHECK(load_error(missing.string()) == missing.string() + ": plugin file does not exist");

  const fs::path not_plugin = kFixtures / "libnot_a_plugin.so";
  CHECK(load_error(not_plugin.string()) ==
        not_plugin.string() + ": not a ptrain plugin (no 'ptrain_plugin_info' entry point)");

  const fs::path abi = kFixtures / "libptrain_plugin_abi_mismatch.so";
  const std::string abi_error = load_error(abi.string());
  CHECK_THAT(abi_error,
             Catch::StartsWith(abi.string() + ": plugin built for SDK ABI version " +
                               std::to_string(sdk::kAbiVersion + 1000) + ", this ptrain supports ABI version " +
                               std::to_string(sdk::kAbiVersion) + "; rebuild the plugin against SDK " +
                               sdk::kSdkVersion + " (find_package(ptrain " + std::to_string(PTRAIN_SDK_VERSION_MAJOR) +
                               "." + std::to_string(PTRAIN_SDK_VERSION_MINOR) + ") with -DCMAKE_PREFIX_PATH="));

  const fs::path torch = kFixtures / "libptrain_plugin_torch_mismatch.so";
  CHECK(load_error(torch.string()) == torch.string() + ": plugin built with LibTorch 0.1, this ptrain uses LibTorch " +
                                          PTRAIN_TORCH_VERSION + "; rebuild the plugin against the same LibTorch");

  const fs::path garbage = fs::temp_directory_path() / "ptrain_garbage_plugin.so";
  std::ofstream(garbage) << "not an ELF file";
  CHECK_THAT(load_error(garbage.string()), Catch::Contains(garbage.string() + ": cannot load library"));

  CHECK_THAT(load_error("no_such_plugin", {kFixtures}),
             Catch::Contains("plugin 'no_such_plugin' not found: no libptrain_plugin_no_such_plugin.so in '" +
                             kFixtures.string() + "'"));
}

TEST_CASE("listing reports usable plugins and the reason others are unusable") {
  const auto listings = plugin::list_plugins({kFixtures, fs::path(PTRAIN_SFT_PLUGIN_PATH).parent_path()});
  bool saw_sft = false;
  bool saw_abi_error = false;
  for (const auto& listing : listings) {
    if (listing.ok && listing.name == "sft") saw_sft = true;
    if (!listing.ok && listing.error.find("SDK ABI version") != std::string::npos) saw_abi_error = true;
  }
  CHECK(saw_sft);
  CHECK(saw_abi_error);
}
