// Resume is exact in every state the run's course depends on, through the
// `ptrain` executable (docs/checkpoints.md): early stopping continues from
// the checkpoint resumed, not from a best.json written after it; the
// numeric guard's counters and loss-spike bar are in the checkpoint; GRPO
// with num_iterations > 1 checkpoints (cadence, stop) only at cycle starts.
#include "catch.h"

#include "support/run_command.h"
#include "support/test_util.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using ptrain::testing::CommandResult;
using ptrain::testing::run_ptrain;

namespace {

std::vector<nlohmann::json> metrics_of(const fs::path& run) {
  return ptrain::testing::read_metrics_jsonl(run / "metrics.jsonl");
}

// Every metric but the wall-clock ones, bit for bit.
void check_same_metrics(const std::vector<nlohmann::json>& actual, const std::vector<nlohmann::json>& expected) {
  static const std::set<std::string> timing{"step_s", "tokens_per_s", "mfu", "comm_s", "eval_s"};
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    for (const auto& [key, value] : expected[i].items()) {
      if (timing.count(key) != 0 || key.rfind("time/", 0) == 0) continue;  // the step-phase timers
      INFO("step " << expected[i]["step"] << ", metric " << key);
      REQUIRE(actual[i].contains(key));
      CHECK(actual[i][key] == value);
    }
  }
}

std::string train(const fs::path& config, const fs::path& run, const std::string& arguments) {
  return "train -c " + config.string() + " --set output_dir=\"" + run.string() + "\" " + arguments;
}

CommandResult run_ok(const std::string& arguments, const std::string& environment = "") {
  const CommandResult result =
      ptrain::testing::run_command(environment + " " + std::string(PTRAIN_EXE) + " " + arguments);
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  return result;
}

void write_lines(const fs::path& path, const std::vector<nlohmann::json>& lines) {
  std::ofstream out(path);
  for (const nlohmann::json& line : lines) out << line.dump() << "\n";
}

// Training teaches "aaaa", the held-out set wants "aaab": eval/loss falls,
// then rises, and early stopping (patience 2) ends the run. A checkpoint after every step.
fs::path write_early_stopping_config(const fs::path& dir) {
  std::vector<nlohmann::json> train, held_out;
  for (int i = 0; i < 16; ++i) train.push_back({{"prompt", "q" + std::to_string(i % 4) + "="}, {"completion", "aaaa"}});
  for (int i = 0; i < 5; ++i) held_out.push_back({{"prompt", "q" + std::to_string(i % 4) + "="}, {"completion", "aaab"}});
  write_lines(dir / "train.jsonl", train);
  write_lines(dir / "held_out.jsonl", held_out);
  const fs::path path = dir / "early.toml";
  std::ofstream(path) << "plugin = \"sft\"\nseed = 2\n"
                      << "[model]\nvocab_size = 259\nhidden_size = 32\nintermediate_size = 64\nnum_layers = 1\n"
                      << "num_heads = 2\nnum_kv_heads = 1\nmax_position_embeddings = 32\n"
                      << "[data]\ntrain = \"" << (dir / "train.jsonl").string() << "\"\nmax_length = 16\n"
                      << "[batch]\nglobal_size = 4\n[optim]\nlr = 1e-2\n[schedule]\nname = \"constant\"\n"
                      << "[train]\nmax_steps = 30\nearly_stopping_patience = 2\n"
                      << "[checkpoint]\nevery_steps = 1\nkeep_last = 100\nbest_metric = \"eval/loss\"\n"
                      << "[runtime]\nthreads = 1\n"
                      << "[eval]\ndata = \"" << (dir / "held_out.jsonl").string() << "\"\nevery_steps = 1\n";
  return path;
}

}  // namespace

TEST_CASE("early stopping resumes from the checkpoint's record, not from evaluations made after it", "[resume]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("resume_early_stopping");
  const fs::path config = write_early_stopping_config(dir);
  run_ok(train(config, dir / "straight", ""));
  const std::vector<nlohmann::json> expected = metrics_of(dir / "straight");
  const auto stop_step = static_cast<int64_t>(expected.size());
  REQUIRE(stop_step < 30);  // the data makes it stop early
  REQUIRE(stop_step >= 5);

  // A run that got one evaluation past the last improvement (best.json
  // counts it) and is resumed from a checkpoint two steps before that
  // improvement, as after a kill that lost the newer checkpoints.
  run_ok(train(config, dir / "resumed", "--set train.max_steps=" + std::to_string(stop_step - 1)));
  const fs::path checkpoint = dir / "resumed" / "checkpoints" / ("step_" + std::to_string(stop_step - 3));
  const nlohmann::json best_json = nlohmann::json::parse(std::ifstream(dir / "resumed" / "best.json"));
  REQUIRE(best_json.at("evaluations_without_improvement") == 1);
  const CommandResult resumed = run_ok(train(config, dir / "resumed", "--resume " + checkpoint.string()));
  INFO(resumed.output);
  check_same_metrics(metrics_of(dir / "resumed"), expected);
  CHECK(ptrain::testing::same_safetensors(dir / "straight" / "best" / "model.safetensors",
                                          dir / "resumed" / "best" / "model.safetensors"));
}

TEST_CASE("the numeric guard's counters and loss-spike bar continue across a resume", "[resume][reliability]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("resume_numeric_guard");
  const fs::path config = dir / "guard.toml";
  std::ofstream(config) << "plugin = \"sft\"\nseed = 4\n"
                        << "[model]\nvocab_size = 259\nhidden_size = 32\nintermediate_size = 64\nnum_layers = 1\n"
                        << "num_heads = 2\nnum_kv_heads = 1\nmax_position_embeddings = 32\n"
                        << "[data]\ntrain = \"" << PTRAIN_SOURCE_DIR << "/data/arith/train.jsonl\"\nmax_length = 16\n"
                        << "[batch]\nglobal_size = 8\n[optim]\nlr = 1e-2\n[schedule]\nname = \"constant\"\n"
                        // factor 1: a loss at least as high as every earlier one is a spike
                        << "[train]\nmax_steps = 16\nloss_spike_factor = 1.0\n"
                        << "[checkpoint]\nevery_steps = 4\n[runtime]\nthreads = 1\n";
  // Step 2 is skipped for a NaN; after step 8 the run is stopped and resumed.
  const std::string nan_at_2 = "PTRAIN_TEST_NAN_AT=2";
  run_ok(train(config, dir / "straight", ""), nan_at_2);
  run_ok(train(config, dir / "resumed", "--set train.max_steps=8"), nan_at_2);
  const CommandResult resumed = run_ok(train(config, dir / "resumed", "--resume auto"), nan_at_2);
  const std::vector<nlohmann::json> expected = metrics_of(dir / "straight");
  REQUIRE(expected.back().at("nonfinite_steps") == 1);
  check_same_metrics(metrics_of(dir / "resumed"), expected);
  // No false alarm: the resumed run compares losses with the whole run's largest.
  CHECK(expected.back().at("loss_spikes") == metrics_of(dir / "resumed").back().at("loss_spikes"));
  INFO(resumed.output);
  CHECK_FALSE(ptrain::testing::contains(resumed.output, "holds no numeric guard counters"));
}

TEST_CASE("GRPO with num_iterations = 2 checkpoints at cycle starts: a stop or cadence between waits a step",
          "[resume][grpo]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("resume_grpo_cycles");
  std::ifstream bundled(std::string(PTRAIN_SOURCE_DIR) + "/data/arith_grpo/train.jsonl");
  std::ofstream data(dir / "prompts.jsonl");
  std::string line;
  for (int count = 0; count < 12 && std::getline(bundled, line); ++count) data << line << "\n";
  data.close();
  const fs::path config = dir / "grpo.toml";
  std::ofstream(config) << "plugin = \"grpo\"\nseed = 3\n"
                        << "[model]\nvocab_size = 259\nhidden_size = 32\nintermediate_size = 64\nnum_layers = 2\n"
                        << "num_heads = 4\nnum_kv_heads = 2\nmax_position_embeddings = 32\n"
                        << "[data]\ntrain = \"" << (dir / "prompts.jsonl").string() << "\"\nmax_length = 16\n"
                        << "[batch]\nglobal_size = 3\nmicro_size = 5\n[optim]\nlr = 1e-3\n"
                        << "[schedule]\nname = \"constant\"\n[train]\nmax_steps = 6\n"
                        << "[checkpoint]\nevery_steps = 3\nkeep_last = 10\n[runtime]\nthreads = 1\n"
                        << "[module]\nnum_generations = 4\nmax_completion_length = 6\nbeta = 0.05\n"
                        << "num_iterations = 2\nreward_funcs = [\"accuracy\", \"format\"]\n";
  run_ok(train(config, dir / "straight", ""));
  // The cadence's step 3 is saved at step 4, where a cycle starts.
  CHECK_FALSE(fs::exists(dir / "straight" / "checkpoints" / "step_3"));
  CHECK(fs::exists(dir / "straight" / "checkpoints" / "step_4"));

  // A stop requested at step 3 waits for step 4; the resume is bit for bit.
  const CommandResult stopped = run_ok(train(config, dir / "resumed", ""), "PTRAIN_TEST_STOP_AT=3");
  CHECK(ptrain::testing::contains(stopped.output, "stopping after step 4, not 3"));
  CHECK(ptrain::testing::contains(stopped.output, "stopped on request after step 4"));
  const CommandResult resumed = run_ok(train(config, dir / "resumed", "--resume auto"));
  CHECK_FALSE(ptrain::testing::contains(resumed.output, "middle of a rollout cycle"));
  check_same_metrics(metrics_of(dir / "resumed"), metrics_of(dir / "straight"));
  CHECK(ptrain::testing::same_safetensors(dir / "straight" / "final" / "model.safetensors",
                                          dir / "resumed" / "final" / "model.safetensors"));

  // The end of a run between cycle starts still saves, and says what a resume of it does.
  const CommandResult odd_end = run_ok(train(config, dir / "odd", "--set train.max_steps=5"));
  CHECK(ptrain::testing::contains(odd_end.output, "falls between multiples of 2 steps"));
  const CommandResult odd_resumed = run_ok(train(config, dir / "odd", "--resume auto"));
  CHECK(ptrain::testing::contains(odd_resumed.output, "step 6 is in the middle of a rollout cycle"));
}
