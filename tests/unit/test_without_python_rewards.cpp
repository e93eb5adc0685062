// Built with -DPTRAIN_PYTHON_REWARDS=OFF: a python: reward is a config error
// that names the option, through the core's loader as GRPO reaches it.
#include "catch.h"

#include "core/plugin/reward_library.h"
#include "ptrain/sdk/errors.h"

#include <filesystem>

TEST_CASE("without Python rewards a python: reward names the build option", "[rewards][python]") {
  const std::string file = (std::filesystem::path(PTRAIN_TEST_FIXTURE_DIR) / "rewards" / "python_rewards.py").string();
  std::string message = "(no error)";
  try {
    ptrain::plugin::load_reward_library("python:" + file, {});
  } catch (const ptrain::sdk::ConfigError& error) {
    message = error.what();
  }
  CHECK(message == "python reward file '" + file +
                       "': this ptrain was built without Python rewards (-DPTRAIN_PYTHON_REWARDS=OFF); rebuild with "
                       "PTRAIN_PYTHON_REWARDS=ON (needs python3-dev and pybind11-dev)");
}
