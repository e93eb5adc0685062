// GRPO reward_funcs entries naming Python functions or reward servers that
// cannot be used: `ptrain validate` refuses each, naming the config file,
// line and key, and the file, function or URL at fault.
#include "catch.h"

#include "bad_inputs/grpo_validate_config.h"
#include "support/run_command.h"
#include "support/test_util.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

const fs::path kRewardFile = fs::path(PTRAIN_TEST_FIXTURE_DIR) / "rewards" / "python_rewards.py";

struct SourceCase {
  const char* name;
  std::string reward_funcs;
  std::string expected;  // after "grpo.toml:18: key 'module.reward_funcs': "
};

}  // namespace

TEST_CASE("unusable Python rewards and reward servers are refused naming the key and the file or URL",
          "[bad_inputs][rewards]") {
  const std::string file = fs::canonical(kRewardFile).string();
  const std::string missing = (kRewardFile.parent_path() / "missing.py").string();
  std::vector<SourceCase> cases = {
      {"no function part", "\"python:" + file + "\"",
       "'python:" + file + "': expected python:FILE.py:FUNCTION (a Python file and the name of a function it defines)"},
      {"not a .py file", "\"python:rewards.txt:score\"",
       "'python:rewards.txt:score': expected python:FILE.py:FUNCTION"},
      {"two functions of one metric name", "\"accuracy\", \"python:" + file + ":accuracy\"",
       "two reward functions are named 'accuracy' (their metrics rewards/accuracy/...); rename one"},
      {"bad port", "\"http://localhost:99999/score\"",
       "reward server URL 'http://localhost:99999/score': port '99999': expected a number from 1 to 65535"},
      {"https", "\"https://rm.example/score\"", "reward server URL 'https://rm.example/score': https is not supported"},
      {"bad setting", "\"http://localhost:8000/score#retry=2\"",
       "reward server URL 'http://localhost:8000/score#retry=2': unknown setting 'retry'"},
  };
#ifdef PTRAIN_PYTHON_REWARDS
  cases.push_back(
      {"missing file", "\"python:" + missing + ":score\"", "python reward file '" + missing + "': no such file"});
  cases.push_back({"missing function", "\"python:" + file + ":scroe\"",
                   file + ": defines no function 'scroe'; it defines digit_count, "});
  const std::string call_errors = fs::canonical(kRewardFile.parent_path() / "call_errors.py").string();
  cases.push_back({"a function without **kwargs", "\"python:" + call_errors + ":exact\"",
                   call_errors + ": reward function 'exact' takes no **kwargs"});
#else
  cases.push_back({"built without Python", "\"python:" + file + ":digit_count\"",
                   "python reward file '" + file + "': this ptrain was built without Python rewards " +
                       "(-DPTRAIN_PYTHON_REWARDS=OFF)"});
#endif
  for (const SourceCase& source : cases) {
    DYNAMIC_SECTION(source.name) {
      const fs::path dir = ptrain::testing::fresh_test_dir("bad_reward_source");
      const fs::path config =
          ptrain::testing::write_grpo_validate_config(dir, "reward_funcs = [" + source.reward_funcs + "]");
      const ptrain::testing::CommandResult result = ptrain::testing::run_ptrain("validate -c " + config.string());
      INFO(result.output);
      CHECK(result.exit_code == 2);  // a config error
      CHECK_THAT(result.output,
                 Catch::Contains(config.string() + ":18: key 'module.reward_funcs': " + source.expected));
    }
  }
}
