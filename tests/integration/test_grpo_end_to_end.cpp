// The `ptrain` executable running the GRPO plugin end to end on a tiny
// random model: rollouts are generated, scored and trained on for a few
// steps with every TRL metric in metrics.jsonl, also with a reward function
// from a reward library; bad prompts and bad reward libraries are refused.
#include "catch.h"

#include "support/test_util.h"

#include "support/run_command.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

namespace {

using ptrain::testing::CommandResult;
using ptrain::testing::run_ptrain;

const char* kBuiltinRewards = "reward_funcs = [\"accuracy\", \"format\", \"length\"]\nreward_weights = [1, 0.5, 0.1]\n";

fs::path write_config(const fs::path& dir, const fs::path& data, const std::string& module_lines,
                      const std::string& reward_lines = kBuiltinRewards) {
  const fs::path path = dir / "grpo_small.toml";
  std::ofstream(path) << "plugin = \"grpo\"\nseed = 3\noutput_dir = \"" << (dir / "run").string() << "\"\n"
                      << "[model]\nvocab_size = 259\nhidden_size = 32\nintermediate_size = 64\nnum_layers = 2\n"
                      << "num_heads = 4\nnum_kv_heads = 2\nmax_position_embeddings = 32\n"
                      << "[data]\ntrain = \"" << data.string() << "\"\nmax_length = 16\n"
                      << "[batch]\nglobal_size = 3\nmicro_size = 5\n"
                      << "[optim]\nlr = 1e-3\n"
                      << "[schedule]\nname = \"constant\"\n"
                      << "[train]\nmax_steps = 4\nlog_every = 1\n"
                      << "[module]\nnum_generations = 4\nmax_completion_length = 6\n"
                      << reward_lines << module_lines;
  return path;
}

}  // namespace

TEST_CASE("ptrain trains GRPO end to end and logs TRL's metrics", "[e2e][grpo][device]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("grpo_e2e_train");
  std::ifstream bundled(std::string(PTRAIN_SOURCE_DIR) + "/data/arith_grpo/train.jsonl");
  std::ofstream data(dir / "prompts.jsonl");
  std::string line;
  for (int count = 0; count < 12 && std::getline(bundled, line); ++count) data << line << "\n";
  data << R"({"messages": [{"role": "user", "content": "2+2="}], "answer": "4"})"
       << "\n";
  data.close();
  const fs::path config = write_config(dir, dir / "prompts.jsonl", "beta = 0.05\nnum_iterations = 2\n");
  const CommandResult result = run_ptrain("train -c " + config.string());
  INFO(result.output);
  REQUIRE(result.exit_code == 0);

  const auto lines = ptrain::testing::read_metrics_jsonl(dir / "run" / "metrics.jsonl");
  REQUIRE(lines.size() == 4);
  for (const nlohmann::json& metrics : lines) {
    for (const char* key :
         {"loss", "reward", "reward_std", "rewards/accuracy/mean", "rewards/accuracy/std", "rewards/format/mean",
          "rewards/length/mean", "frac_reward_zero_std", "completions/mean_length", "completions/min_length",
          "completions/max_length", "completions/clipped_ratio", "kl", "entropy", "clip_ratio/low_mean",
          "clip_ratio/high_mean", "clip_ratio/region_mean"}) {
      INFO("metric " << key << " in " << metrics.dump());
      REQUIRE(metrics.contains(key));
      CHECK(std::isfinite(metrics[key].get<double>()));
    }
    CHECK(metrics["completions/max_length"].get<double>() <= 6.0);
  }
  // The first update of each pair of steps uses π_old = π: nothing clipped, no KL yet.
  CHECK(lines[0]["clip_ratio/region_mean"].get<double>() == 0.0);
  CHECK(lines[0]["kl"].get<double>() == Approx(0.0).margin(1e-12));
  CHECK(fs::exists(dir / "run" / "final" / "model.safetensors"));
}

TEST_CASE("GRPO refuses prompts without the answer its accuracy reward needs", "[e2e][grpo]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("grpo_e2e_bad");
  std::ofstream(dir / "prompts.jsonl") << R"({"prompt": "1+1=", "answer": "2"})"
                                       << "\n"
                                       << R"({"prompt": "2+2="})"
                                       << "\n";
  const fs::path config = write_config(dir, dir / "prompts.jsonl", "");
  const CommandResult result = run_ptrain("train -c " + config.string());
  CHECK(result.exit_code == 2);  // bad input
  CHECK_THAT(result.output, Catch::Contains("prompts.jsonl:2") && Catch::Contains("answer"));
}

TEST_CASE("ptrain trains GRPO with a reward function from a reward library", "[e2e][grpo][reward_plugin]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("grpo_e2e_reward_plugin");
  std::ifstream bundled(std::string(PTRAIN_SOURCE_DIR) + "/data/arith_grpo/train.jsonl");
  std::ofstream data(dir / "prompts.jsonl");
  std::string line;
  for (int count = 0; count < 6 && std::getline(bundled, line); ++count) data << line << "\n";
  data.close();
  const std::string library = std::string(PTRAIN_TEST_PLUGIN_DIR) + "/libptrain_reward_test_rewards.so";
  const fs::path config = write_config(dir, dir / "prompts.jsonl", "",
                                       "reward_plugins = [\"" + library +
                                           "\"]\nreward_funcs = [\"accuracy\", \"digit_count\"]\n"
                                           "reward_weights = [1, 0.1]\n");
  const CommandResult result = run_ptrain("train -c " + config.string());
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.output, Catch::Contains("loaded reward library test_rewards from") && Catch::Contains("sha256"));
  const auto lines = ptrain::testing::read_metrics_jsonl(dir / "run" / "metrics.jsonl");
  REQUIRE(lines.size() == 4);
  for (const nlohmann::json& metrics : lines) {
    INFO(metrics.dump());
    REQUIRE(metrics.contains("rewards/digit_count/mean"));
    // Completions have at most 6 tokens, so at most 6 digits.
    CHECK(metrics["rewards/digit_count/mean"].get<double>() >= 0.0);
    CHECK(metrics["rewards/digit_count/mean"].get<double>() <= 6.0);
    CHECK(metrics["reward"].get<double>() == Approx(metrics["rewards/accuracy/mean"].get<double>() +
                                                    0.1 * metrics["rewards/digit_count/mean"].get<double>()));
  }
}

TEST_CASE("ptrain refuses a reward library built for another SDK ABI before training", "[e2e][grpo][reward_plugin]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("grpo_e2e_bad_reward_plugin");
  std::ofstream(dir / "prompts.jsonl") << R"({"prompt": "1+1=", "answer": "2"})"
                                       << "\n";
  const std::string library = std::string(PTRAIN_TEST_PLUGIN_DIR) + "/libptrain_reward_abi_mismatch.so";
  const fs::path config = write_config(dir, dir / "prompts.jsonl", "",
                                       "reward_plugins = [\"" + library + "\"]\nreward_funcs = [\"accuracy\"]\n");
  for (const std::string command : {"validate -c ", "train -c "}) {
    const CommandResult result = run_ptrain(command + config.string());
    INFO(command << "\n" << result.output);
    CHECK(result.exit_code == 1);
    CHECK_THAT(result.output, Catch::Contains("grpo_small.toml:") && Catch::Contains("module.reward_plugins") &&
                                  Catch::Contains(library) &&
                                  Catch::Contains("reward library built for SDK ABI version"));
  }
  CHECK_FALSE(fs::exists(dir / "run" / "metrics.jsonl"));
}

// The plugin's error reaches `main` after the plugin is unloaded: its message must still be readable.
TEST_CASE("a reward function that scores NaN stops training with its name", "[e2e][grpo][reward_plugin]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("grpo_e2e_nan_reward");
  std::ofstream(dir / "prompts.jsonl") << R"({"prompt": "1+1=", "answer": "2"})"
                                       << "\n"
                                       << R"({"prompt": "2+2=", "answer": "4"})"
                                       << "\n"
                                       << R"({"prompt": "3+3=", "answer": "6"})"
                                       << "\n";
  const std::string library = std::string(PTRAIN_TEST_PLUGIN_DIR) + "/libptrain_reward_test_rewards.so";
  const fs::path config = write_config(dir, dir / "prompts.jsonl", "",
                                       "reward_plugins = [\"" + library + "\"]\nreward_funcs = [\"not_finite\"]\n");
  const CommandResult result = run_ptrain("train -c " + config.string());
  INFO(result.output);
  CHECK(result.exit_code == 1);
  CHECK_THAT(result.output, Catch::Contains("reward function 'not_finite' scored a completion of") &&
                                Catch::Contains("prompts.jsonl:") && Catch::Contains("rewards must be finite"));
}

// The core deals refill rounds the next global batches of its sampler
// (Context::upcoming_examples); the counts reach metrics.jsonl. A random
// model's answers are all wrong, so the digits it happens to emit
// (digit_count of the test reward library) give some groups a spread.
TEST_CASE("ptrain trains GRPO with CISPO, SAPO and dynamic sampling that refills", "[e2e][grpo]") {
  for (const std::string policy_loss : {"cispo", "sapo"}) {
    DYNAMIC_SECTION("policy_loss " << policy_loss) {
      const fs::path dir = ptrain::testing::fresh_test_dir("grpo_e2e_refill_" + policy_loss);
      std::ifstream bundled(std::string(PTRAIN_SOURCE_DIR) + "/data/arith_grpo/one_digit.jsonl");
      std::ofstream data(dir / "prompts.jsonl");
      std::string line;
      for (int count = 0; count < 12 && std::getline(bundled, line); ++count) data << line << "\n";
      data.close();
      const fs::path config =
          write_config(dir, dir / "prompts.jsonl",
                       "policy_loss = \"" + policy_loss +
                           "\"\nnum_iterations = 2\nfilter_zero_std_groups = true\nmax_generation_rounds = 3\n",
                       "reward_plugins = [\"" + std::string(PTRAIN_TEST_PLUGIN_DIR) +
                           "/libptrain_reward_test_rewards.so\"]\nreward_funcs = [\"accuracy\", \"digit_count\"]\n");
      const CommandResult result = run_ptrain("train -c " + config.string());
      INFO(result.output);
      REQUIRE(result.exit_code == 0);
      CHECK_THAT(result.output, Catch::Contains("policy_loss " + policy_loss));
      const auto lines = ptrain::testing::read_metrics_jsonl(dir / "run" / "metrics.jsonl");
      REQUIRE(lines.size() == 4);
      for (const nlohmann::json& metrics : lines) {
        INFO(metrics.dump());
        REQUIRE(metrics.contains("groups/generation_rounds"));
        const double rounds = metrics["groups/generation_rounds"].get<double>();
        CHECK(rounds >= 1.0);
        CHECK(rounds <= 3.0);
        CHECK(metrics["groups/generated"].get<double>() == 3.0 * rounds);  // global_size 3 a round
        CHECK(metrics["groups/kept"].get<double>() <= 3.0);
        // A round is added only while the batch is short of informative groups.
        if (rounds < 3.0) CHECK(metrics["groups/kept"].get<double>() == 3.0);
        CHECK(std::isfinite(metrics["loss"].get<double>()));
        if (policy_loss == "sapo") CHECK(metrics["clip_ratio/region_mean"].get<double>() == 0.0);
      }
    }
  }
}

TEST_CASE("ptrain trains GRPO on episodes with the calculator environment, found by name",
          "[e2e][grpo][environment][device]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("grpo_e2e_environment");
  std::ifstream bundled(std::string(PTRAIN_SOURCE_DIR) + "/data/calculator/train.jsonl");
  std::ofstream data(dir / "prompts.jsonl");
  std::string line;
  for (int count = 0; count < 6 && std::getline(bundled, line); ++count) data << line << "\n";
  data.close();
  // Room for a tool call, its result and an answer: max_length 40 under 48 positions.
  const fs::path config = write_config(dir, dir / "prompts.jsonl",
                                       "environment = \"calculator\"\nmax_turns = 2\nmax_completion_length = 20\n"
                                       "[tokenizer]\nchat_template = \"plain\"\n",
                                       "reward_funcs = [\"format\"]\nreward_weights = [0.1]\n");
  std::string text;
  {
    std::ifstream in(config);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  for (const auto& [from, to] :
       {std::pair<std::string, std::string>{"max_position_embeddings = 32", "max_position_embeddings = 48"},
        {"max_length = 16", "max_length = 40"},
        {"max_completion_length = 6\n", ""}}) {
    text.replace(text.find(from), from.size(), to);
  }
  std::ofstream(config) << text;
  const CommandResult result = run_ptrain("train -c " + config.string());
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.output, Catch::Contains("loaded environment library calculator"));
  const auto lines = ptrain::testing::read_metrics_jsonl(dir / "run" / "metrics.jsonl");
  REQUIRE(lines.size() == 4);
  for (const nlohmann::json& metrics : lines) {
    INFO(metrics.dump());
    for (const char* key : {"loss", "reward", "rewards/environment/mean", "rewards/format/mean", "episodes/turns"}) {
      REQUIRE(metrics.contains(key));
      CHECK(std::isfinite(metrics[key].get<double>()));
    }
    CHECK(metrics["episodes/turns"].get<double>() >= 1.0);
    CHECK(metrics["episodes/turns"].get<double>() <= 2.0);
    CHECK(metrics["completions/max_length"].get<double>() <= 20.0);
  }
}
