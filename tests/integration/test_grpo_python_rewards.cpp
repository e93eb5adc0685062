// `ptrain train` with GRPO rewards from outside C++: a Python function
// (python:FILE.py:FUNCTION) and a reward server (http://...) scoring the same
// digit count, so each checks the other on every step; a Python function that
// raises stops the run with its name and traceback.
#include "catch.h"

#include "integration/small_sft_run.h"
#include "support/reward_server.h"
#include "support/run_command.h"
#include "support/test_util.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

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

TEST_CASE("ptrain eval scores with a Python function and a reward server, on one rank or two",
          "[e2e][generate][rewards]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("eval_python_http");
  ptrain::testing::RewardServer server;
  // A model whose answers are text (a random byte model's are mostly bytes that are no UTF-8).
  const CommandResult trained =
      run_ptrain("train -c " + ptrain::testing::write_small_sft_config(dir, "sft", 1e-2, 60).string() + " 2>&1");
  INFO(trained.output);
  REQUIRE(trained.exit_code == 0);
  const fs::path model = dir / "sft";
  const std::string eval = "eval -m " + model.string() + " -d " + PTRAIN_SOURCE_DIR +
                           "/data/arith/test.jsonl --max-examples 20 --n 2 --temperature 1 --max-new-tokens 6 "
                           "-r python:" + kRewardFile + ":digit_count -r " + server.url("/digits");
  std::string written[2];
  for (int ranks = 1; ranks <= 2; ++ranks) {
    const fs::path out = dir / ("eval" + std::to_string(ranks) + ".json");
    const CommandResult result =
        run_ptrain((ranks == 2 ? "launch --nproc 2 -- " : "") + eval + " -o " + out.string() + " 2>&1");
    INFO(result.output);
    REQUIRE(result.exit_code == 0);
    std::ifstream in(out);
    written[ranks - 1].assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  CHECK(written[1] == written[0]);
  const nlohmann::json result = nlohmann::json::parse(written[0]);
  const std::string server_name = server.url("/digits").substr(std::string("http://").size());
  double digits = 0.0;
  for (const nlohmann::json& completion : result.at("completions")) {
    const std::string text = completion.at("completion");
    double count = 0.0;
    for (const char c : text) count += (c >= '0' && c <= '9') ? 1.0 : 0.0;
    CHECK(completion.at("rewards").at("digit_count") == count);
    CHECK(completion.at("rewards").at(server_name) == count);
    digits += count;
  }
  REQUIRE(result.at("completions").size() == 40u);
  CHECK(digits > 0.0);  // the reference is not vacuous
  CHECK(result.at("means").at("digit_count").get<double>() == Approx(digits / 40.0).epsilon(1e-12));
  CHECK(result.at("means").at(server_name).get<double>() == Approx(digits / 40.0).epsilon(1e-12));
}
