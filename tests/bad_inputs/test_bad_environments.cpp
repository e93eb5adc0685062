// Environment libraries ptrain cannot use and GRPO environment keys that do
// not fit: each refused naming the path (and both versions), or the config
// file, line and key.
#include "catch.h"

#include "bad_inputs/grpo_validate_config.h"
#include "bad_inputs/rejection.h"
#include "support/run_command.h"
#include "support/test_util.h"

#include "core/config/config_loader.h"
#include "core/plugin/environment_library.h"
#include "grpo_config.h"
#include "ptrain/sdk/config_schema.h"
#include "ptrain/sdk/plugin.h"

#include <filesystem>
#include <fstream>
#include <string>

using namespace ptrain;
namespace fs = std::filesystem;

namespace {

const fs::path kFixtures = PTRAIN_TEST_PLUGIN_DIR;
const fs::path kCalculator = PTRAIN_CALCULATOR_ENV;

// A GRPO config whose [module] ends with `module` from line 18 (line 17: num_generations).
fs::path write_config(const fs::path& dir, const std::string& module) {
  return testing::write_grpo_validate_config(dir, module);
}

grpo::GrpoConfig read_module(const fs::path& file) {
  sdk::ConfigSchema schema;
  grpo::declare_grpo_config(schema);
  return grpo::read_grpo_config(config::load_run_config(file, {}, schema).module);
}

}  // namespace

TEST_CASE("unusable environment libraries are refused naming the path and the reason", "[bad_inputs][environment]") {
  const fs::path missing = kFixtures / "libptrain_env_nothing_here.so";
  testing::check_rejected([&] { plugin::load_environment(missing.string(), {}); }, "PluginError",
                          missing.string() + ": environment library file does not exist");

  const fs::path abi = kFixtures / "libptrain_env_abi_mismatch.so";
  testing::check_rejected([&] { plugin::load_environment(abi.string(), {}); }, "PluginError",
                          abi.string() + ": environment library built for SDK ABI version " +
                              std::to_string(sdk::kAbiVersion + 1000) + ", this ptrain supports ABI version " +
                              std::to_string(sdk::kAbiVersion));

  const fs::path rewards = kFixtures / "libptrain_reward_test_rewards.so";
  testing::check_rejected([&] { plugin::load_environment(rewards.string(), {}); }, "PluginError",
                          rewards.string() +
                              ": not a ptrain environment library (no 'ptrain_environment_plugin_info' entry point); "
                              "it is a reward library: name it in module.reward_plugins");

  const fs::path sft = PTRAIN_SFT_PLUGIN_PATH;
  testing::check_rejected([&] { plugin::load_environment(sft.string(), {}); }, "PluginError",
                          "; it is an algorithm plugin: name it in `plugin =`");

  testing::check_rejected(
      [&] { plugin::load_environment("no_such_env", {kFixtures}); }, "ConfigError",
      "environment library 'no_such_env' not found: no libptrain_env_no_such_env.so in '" + kFixtures.string() + "'");

  const fs::path dir = testing::fresh_test_dir("bad_env_renamed");
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
  fs::copy_file(kCalculator, dir / "libptrain_env_other.so");
  testing::check_rejected([&] { plugin::load_environment("other", {dir}); }, "PluginError",
                          (dir / "libptrain_env_other.so").string() +
                              ": file is named for environment 'other' but the library calls itself 'calculator'");

  SECTION("an example without the field the environment needs: the host's DataError naming the line") {
    const std::unique_ptr<sdk::Environment> calculator = plugin::load_environment(kCalculator.string(), {});
    const sdk::Example example{0, "prompts.jsonl:3", nlohmann::json{{"prompt", "1+1="}}};
    testing::check_rejected([&] { calculator->start(example); }, "DataError",
                            "prompts.jsonl:3: missing field 'answer'");
  }
}

TEST_CASE("GRPO environment keys that do not fit are refused naming file:line and key",
          "[bad_inputs][environment][config]") {
  const fs::path dir = testing::fresh_test_dir("bad_env_config");
  struct Case {
    const char* name;
    std::string module;
    std::string location;
    std::string message;
  };
  const std::vector<Case> cases{
      {"max_turns without an environment", "max_turns = 2\n", ":18: key 'module.max_turns'",
       "applies to multi-turn episodes, but module.environment is empty"},
      {"environment_weight without an environment", "environment_weight = 0.5\n",
       ":18: key 'module.environment_weight'", "but module.environment is empty"},
      {"max_turns of 0", "environment = \"calculator\"\nmax_turns = 0\n", ":19: key 'module.max_turns'", ""},
      {"max_turns not an integer", "environment = \"calculator\"\nmax_turns = 1.5\n", ":19: key 'module.max_turns'",
       ""},
      {"no reward at all", "reward_funcs = []\n", ":18: key 'module.reward_funcs'",
       "expected at least one reward function (or a reward model in module.reward_models), or a "
       "module.environment"},
  };
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.name) {
      const fs::path file = write_config(dir, c.module);
      const testing::Rejection rejection = testing::rejection_of([&] { read_module(file); });
      INFO(rejection.message);
      CHECK(rejection.kind == "ConfigError");
      CHECK_THAT(rejection.message, Catch::Contains(file.string() + c.location));
      CHECK_THAT(rejection.message, Catch::Contains(c.message));
    }
  }
  SECTION("an environment alone is a reward: its column comes last, with its weight") {
    const fs::path file =
        write_config(dir, "environment = \"calculator\"\nreward_funcs = [\"format\"]\nenvironment_weight = 2.0\n");
    const grpo::GrpoConfig config = read_module(file);
    CHECK(config.reward_names == std::vector<std::string>{"format", "environment"});
    CHECK(config.reward_weights == std::vector<double>{1.0, 2.0});
  }
  SECTION("`ptrain validate` opens the library and refuses one built for another ABI") {
    const fs::path abi = kFixtures / "libptrain_env_abi_mismatch.so";
    const fs::path file = write_config(dir, "reward_funcs = []\nenvironment = \"" + abi.string() + "\"\n");
    const testing::CommandResult result = testing::run_ptrain("validate -c " + file.string());
    INFO(result.output);
    CHECK(result.exit_code != 0);
    CHECK_THAT(result.output, Catch::Contains(file.string() + ":19: key 'module.environment': " + abi.string() +
                                              ": environment library built for SDK ABI version"));
  }
}
