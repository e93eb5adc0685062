// Loading the real SFT plugin and listing plugins; the refusals are in
// tests/bad_inputs/test_bad_plugins.cpp.
#include "catch.h"

#include "core/plugin/plugin_loader.h"
#include "ptrain/sdk/errors.h"

#include <filesystem>
#include <memory>

using namespace ptrain;
namespace fs = std::filesystem;

namespace {

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
