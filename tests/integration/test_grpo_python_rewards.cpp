// `ptrain train` with GRPO rewards from outside C++: a Python function
// (python:FILE.py:FUNCTION) and a reward server (http://...) scoring the same
// digit count, so each checks the other on every step; a Python function that
// raises stops the run with its name and traceback.
#include "catch.h"

#include "support/reward_server.h"
#include "support/run_command.h"
#include "support/test_util.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

namespace {

using ptrain::testing::CommandResult;
using ptrain::testing::run_ptrain;

const std::string kRewardFile = std::string(PTRAIN_SOURCE_DIR) + "/tests/fixtures/rewards/python_rewards.py";

fs::path write_config(const fs::path& dir, const std::string& reward_lines) {
  std::ifstream bundled(std::string(PTRAIN_SOURCE_DIR) + "/data/arith_grpo/train.jsonl");
  std::ofstream data(dir / "prompts.jsonl");
  std::string line;
  for (int count = 0; count < 6 && std::getline(bundled, line); ++count) data << line << "\n";
  const fs::path path = dir / "grpo_python.toml";
  std::ofstream(path) << "plugin = \"grpo\"\nseed = 3\noutput_dir = \"" << (dir / "run").string() << "\"\n"
                      << "[model]\nvocab_size = 259\nhidden_size = 32\nintermediate_size = 64\nnum_layers = 2\n"
                      << "num_heads = 4\nnum_kv_heads = 2\nmax_position_embeddings = 32\n"
                      << "[data]\ntrain = \"" << (dir / "prompts.jsonl").string() << "\"\nmax_length = 16\n"
                      << "[batch]\nglobal_size = 3\nmicro_size = 5\n"
                      << "[optim]\nlr = 1e-3\n"
                      << "[train]\nmax_steps = 2\nlog_every = 1\n"
                      << "[module]\nnum_generations = 4\nmax_completion_length = 6\n"
                      << reward_lines;
  return path;
}

}  // namespace

TEST_CASE("GRPO trains on a Python reward function and a reward server", "[e2e][grpo][rewards][device]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("grpo_e2e_python_reward");
  ptrain::testing::RewardServer server;
  const std::string url = server.url("/digits");
  const fs::path config = write_config(dir, "reward_funcs = [\"accuracy\", \"python:" + kRewardFile +
                                                ":digit_count\", \"" + url + "\"]\nreward_weights = [1, 0.1, 0.2]\n");
  const CommandResult result = run_ptrain("train -c " + config.string());
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  const std::string server_metric = "rewards/" + url.substr(std::string("http://").size()) + "/mean";
  const auto lines = ptrain::testing::read_metrics_jsonl(dir / "run" / "metrics.jsonl");
  REQUIRE(lines.size() == 2);
  for (const nlohmann::json& metrics : lines) {
    INFO(metrics.dump());
    REQUIRE(metrics.contains("rewards/digit_count/mean"));
    REQUIRE(metrics.contains(server_metric));
    const double digits = metrics["rewards/digit_count/mean"].get<double>();
    CHECK(digits >= 0.0);
    CHECK(digits <= 6.0);                                   // completions have at most 6 tokens
    CHECK(metrics[server_metric].get<double>() == digits);  // the server counts digits too
    CHECK(metrics["reward"].get<double>() ==
          Approx(metrics["rewards/accuracy/mean"].get<double>() + 0.1 * digits + 0.2 * digits));
  }
}

TEST_CASE("a Python reward that raises stops training with its name and traceback", "[e2e][grpo][rewards]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("grpo_e2e_python_raises");
  const fs::path config = write_config(dir, "reward_funcs = [\"python:" + kRewardFile + ":raises\"]\n");
  const CommandResult result = run_ptrain("train -c " + config.string());
  INFO(result.output);
  CHECK(result.exit_code == 1);
  CHECK_THAT(result.output, Catch::Contains("reward function 'raises' of " + fs::canonical(kRewardFile).string() +
                                            " raised an exception:") &&
                                Catch::Contains("Traceback (most recent call last):") &&
                                Catch::Contains("in _score_or_fail") && Catch::Contains("ValueError: cannot score"));
}
