// Bad [module] keys of the DPO plugin: each a ConfigError naming file:line
// and the key, from the TOML a user writes through the same loader and the
// plugin's own reader. Keys that would do nothing are refused like the others.
#include "catch.h"

#include "bad_inputs/module_config.h"
#include "bad_inputs/rejection.h"
#include "support/run_command.h"
#include "support/test_util.h"

#include "core/config/config_loader.h"
#include "dpo_config.h"
#include "ptrain/sdk/config_schema.h"

#include <filesystem>
#include <string>
#include <vector>

using namespace ptrain;
namespace fs = std::filesystem;

namespace {

const std::string kDpo = testing::config_up_to_module("dpo");  // its [module] keys start at line 9

sdk::ConfigSchema dpo_schema() {
  sdk::ConfigSchema schema;
  dpo::declare_dpo_config(schema);
  return schema;
}

dpo::DpoConfig read(const fs::path& file) {
  const config::RunConfig config = config::load_run_config(file, {}, dpo_schema());
  return dpo::read_dpo_config(config.module, config.data.max_length);
}

}  // namespace

TEST_CASE("DPO keys that do nothing without sync_reference are refused naming file:line and key",
          "[bad_inputs][config][dpo]") {
  const fs::path dir = testing::fresh_test_dir("bad_dpo_config");
  struct Case {
    const char* name;
    std::string module;
    std::string message;  // after the file path
  };
  const std::vector<Case> cases = {
      {"sync_reference_steps without sync_reference", "sync_reference_steps = 64\n",
       ":9: key 'module.sync_reference_steps': applies to TR-DPO, but module.sync_reference is false"},
      {"sync_reference_alpha without sync_reference", "sync_reference = false\nsync_reference_alpha = 0.9\n",
       ":10: key 'module.sync_reference_alpha': applies to TR-DPO, but module.sync_reference is false"},
  };
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.name) {
      const fs::path file = testing::write_text_file(dir, "dpo.toml", kDpo + c.module);
      testing::check_rejected([&] { read(file); }, "ConfigError", file.string() + c.message);
    }
  }
  SECTION("with sync_reference, or at their defaults (as a resolved config.toml lists them), they are accepted") {
    for (const std::string module : {"sync_reference = true\nprecompute_reference = false\nsync_reference_steps = 64\n",
                                     "sync_reference_steps = 512\nsync_reference_alpha = 0.6\n"}) {
      const fs::path file = testing::write_text_file(dir, "dpo.toml", kDpo + module);
      CHECK(read(file).sync_reference_steps >= 64);
    }
  }
}
