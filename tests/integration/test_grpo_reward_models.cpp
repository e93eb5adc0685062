// GRPO with a reward model (module.reward_models) end to end: the `ptrain`
// executable loads a tiny sequence-classification model directory written by
// the test, scores every completion with it next to a reward function, and
// reports it as rewards/<directory name>/..., weighted into the reward as
// reward_weights says. `plugins --describe grpo` lists the option.
#include "catch.h"

#include "support/reward_model_dir.h"
#include "support/run_command.h"
#include "support/test_util.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

namespace fs = std::filesystem;

TEST_CASE("GRPO trains with a reward model's scores weighted with a reward function",
          "[e2e][grpo][reward_model][device]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("grpo_reward_model");
  ptrain::testing::write_tiny_reward_model(dir / "tiny_rm");
  std::ofstream(dir / "prompts.jsonl") << R"({"prompt": "72-17=", "answer": "55"})"
                                       << "\n"
                                       << R"({"prompt": "97+8=", "answer": "105"})"
                                       << "\n"
                                       << R"({"messages": [{"role": "user", "content": "2+2="}], "answer": "4"})"
                                       << "\n";
  const fs::path config = dir / "grpo_rm.toml";
  std::ofstream(config) << "plugin = \"grpo\"\nseed = 5\noutput_dir = \"" << (dir / "run").string() << "\"\n"
                        << "[model]\nvocab_size = 259\nhidden_size = 32\nintermediate_size = 64\nnum_layers = 2\n"
                        << "num_heads = 4\nnum_kv_heads = 2\nmax_position_embeddings = 32\n"
                        << "[data]\ntrain = \"" << (dir / "prompts.jsonl").string() << "\"\nmax_length = 16\n"
                        << "[batch]\nglobal_size = 3\nmicro_size = 4\n"
                        << "[optim]\nlr = 1e-3\n"
                        << "[train]\nmax_steps = 2\nlog_every = 1\n"
                        << "[module]\nnum_generations = 4\nmax_completion_length = 6\ngeneration_batch_size = 5\n"
                        << "reward_funcs = [\"closeness\"]\nreward_models = [\"" << (dir / "tiny_rm/").string()
                        << "\"]\nreward_weights = [1.0, 0.5]\n";
  const ptrain::testing::CommandResult result = ptrain::testing::run_ptrain("train -c " + config.string());
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.output, Catch::Contains("rewards 1·closeness + 0.5·tiny_rm"));

  const auto lines = ptrain::testing::read_metrics_jsonl(dir / "run" / "metrics.jsonl");
  REQUIRE(lines.size() == 2);
  for (const nlohmann::json& metrics : lines) {
    INFO(metrics.dump());
    for (const char* key : {"reward", "rewards/closeness/mean", "rewards/tiny_rm/mean", "rewards/tiny_rm/std"}) {
      REQUIRE(metrics.contains(key));
      CHECK(std::isfinite(metrics[key].get<double>()));
    }
    // Twelve different completions get different scores: the model's score, not a constant.
    CHECK(metrics["rewards/tiny_rm/std"].get<double>() > 1e-3);
    // The reward of a completion is Σ_f w_f r_f, so its mean is the weighted sum of the means.
    const double weighted =
        metrics["rewards/closeness/mean"].get<double>() + 0.5 * metrics["rewards/tiny_rm/mean"].get<double>();
    CHECK(metrics["reward"].get<double>() == Approx(weighted).epsilon(1e-9).margin(1e-9));
  }
}

TEST_CASE("plugins --describe grpo lists reward_models", "[e2e][describe][reward_model]") {
  const ptrain::testing::CommandResult described = ptrain::testing::run_ptrain("plugins --describe grpo");
  INFO(described.output);
  REQUIRE(described.exit_code == 0);
  CHECK_THAT(described.output, Catch::Contains("\n  reward_models  list of strings, default []\n"));
  CHECK_THAT(described.output, Catch::Contains("Hugging Face sequence-classification model directories"));
}
