// Numeric faults and run directories through the `ptrain` executable: a NaN
// step is skipped with weights, optimizer state and schedule unchanged, too
// many in a row abort, NaN never reaches a checkpoint, and neither a refused
// nor a failed run touches an existing run directory.
#include "catch.h"

#include "support/run_command.h"
#include "support/test_util.h"

#include "core/checkpoint/checkpoint.h"
#include "core/model/causal_lm.h"
#include "core/train/numeric_guard.h"
#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

namespace fs = std::filesystem;
using namespace ptrain;
using testing::CommandResult;
using testing::run_command;
using testing::run_ptrain;

namespace {

fs::path write_config(const fs::path& dir) {
  std::ofstream data(dir / "train.jsonl");
  for (int i = 0; i < 32; ++i)
    data << nlohmann::json{{"prompt", std::to_string(i) + "+1="}, {"completion", std::to_string(i + 1)}}.dump() << "\n";
  const fs::path path = dir / "run.toml";
  std::ofstream(path) << "plugin = \"sft\"\nseed = 4\n"
                      << "[model]\nvocab_size = 259\nhidden_size = 32\nintermediate_size = 64\nnum_layers = 2\n"
                      << "num_heads = 4\nnum_kv_heads = 2\nmax_position_embeddings = 32\n"
                      << "[data]\ntrain = \"" << (dir / "train.jsonl").string() << "\"\nmax_length = 16\n"
                      << "[batch]\nglobal_size = 8\n"
                      << "[optim]\nlr = 3e-3\n"
                      << "[schedule]\nname = \"linear\"\n"
                      << "[train]\nmax_steps = 4\n"
                      << "[checkpoint]\nevery_steps = 1\nkeep_last = 10\n";
  return path;
}

std::string train_args(const fs::path& config, const fs::path& run) {
  return "train -c " + config.string() + " --set output_dir=\"" + run.string() + "\"";
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("a non-finite step is skipped: weights, optimizer state and schedule stay where they were", "[reliability]") {
  const fs::path dir = testing::fresh_test_dir("nan_skip");
  const fs::path config = write_config(dir);
  const fs::path run = dir / "run";
  const CommandResult result =
      run_command("PTRAIN_TEST_NAN_AT=2 " + std::string(PTRAIN_EXE) + " " + train_args(config, run) + " 2>&1");
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.output, Catch::Contains("step 2: non-finite loss or gradient norm on some rank; update skipped"));

  const auto metrics = testing::read_metrics_jsonl(run / "metrics.jsonl");
  REQUIRE(metrics.size() == 4);
  CHECK(metrics[0]["nonfinite_steps"] == 0);
  CHECK(metrics[1]["nonfinite_steps"] == 1);
  CHECK(metrics[1]["skipped_steps"] == 1);
  CHECK(metrics[3]["nonfinite_steps"] == 1);
  // The linear schedule counts applied updates: step 3 gets the rate step 2 would have had.
  const double lr1 = metrics[0]["lr"], lr2 = metrics[1]["lr"], lr3 = metrics[2]["lr"], lr4 = metrics[3]["lr"];
  CHECK(lr1 > lr2);
  CHECK(lr3 == lr2);
  CHECK(lr4 < lr3);

  const fs::path checkpoints = run / "checkpoints";
  CHECK(testing::same_safetensors(checkpoints / "step_1" / "model.safetensors",
                                  checkpoints / "step_2" / "model.safetensors"));
  CHECK(testing::same_safetensors(checkpoints / "step_1" / "optimizer.safetensors",
                                  checkpoints / "step_2" / "optimizer.safetensors"));
  CHECK_FALSE(testing::same_safetensors(checkpoints / "step_2" / "model.safetensors",
                                        checkpoints / "step_3" / "model.safetensors"));
}

TEST_CASE("train.max_consecutive_skips non-finite steps in a row abort without a checkpoint of them", "[reliability]") {
  const fs::path dir = testing::fresh_test_dir("nan_abort");
  const fs::path config = write_config(dir);
  const fs::path run = dir / "run";
  const CommandResult result = run_command("PTRAIN_TEST_NAN_AT=2,3 " + std::string(PTRAIN_EXE) + " " +
                                           train_args(config, run) + " --set train.max_consecutive_skips=2 2>&1");
  INFO(result.output);
  CHECK(result.exit_code == 1);
  CHECK_THAT(result.output, Catch::Contains("step 3: 2 consecutive updates had a non-finite loss or gradient norm "
                                            "(train.max_consecutive_skips = 2)"));
  CHECK(fs::exists(run / "checkpoints" / "step_2"));
  CHECK_FALSE(fs::exists(run / "checkpoints" / "step_3"));
  CHECK_FALSE(fs::exists(run / "final"));
  CHECK(read_text(run / "checkpoints" / "latest") == "step_2\n");
}

TEST_CASE("a checkpoint or final model holding NaN or Inf is refused before anything is written", "[reliability]") {
  const fs::path dir = testing::fresh_test_dir("nan_checkpoint");
  const auto model = model::CausalLm::init_random(testing::tiny_model_config(), 1);
  {
    at::NoGradGuard no_grad;
    model->named_parameters()[3].second.view({-1})[5] = std::numeric_limits<float>::infinity();
  }
  const std::string bad = model->named_parameters()[3].first;
  checkpoint::CheckpointData data;
  data.model = model.get();
  data.trainer.completed_steps = 7;
  data.trainer.plugin = "sft";
  data.trainer.run_id = "run";
  CHECK_THAT(testing::error_of([&] { checkpoint::write_checkpoint(dir / "checkpoints", data, 2); }),
             Catch::Contains("step_7: refusing to write: weight tensor '" + bad + "' holds NaN or Inf"));
  CHECK_FALSE(fs::exists(dir / "checkpoints" / "step_7"));
  CHECK_FALSE(fs::exists(dir / "checkpoints" / "latest"));
  CHECK_THAT(testing::error_of([&] { checkpoint::save_model_atomically(*model, dir / "final"); }),
             Catch::Contains("final: refusing to write: weight tensor '" + bad + "'"));
  CHECK_FALSE(fs::exists(dir / "final"));
}

TEST_CASE("loss spikes are flagged against the largest earlier loss, and faults count and reset", "[reliability]") {
  train::NumericGuard guard(3, 2.0);
  CHECK_FALSE(guard.on_step(1, false, 4.0).spike);  // the first loss sets the bar
  CHECK_FALSE(guard.on_step(2, false, 3.0).spike);
  CHECK_FALSE(guard.on_step(3, false, 7.9).spike);  // < 2 × 4
  CHECK(guard.on_step(4, false, 16.0).spike);       // >= 2 × 7.9
  CHECK(guard.on_step(5, false, 15.9).spike);       // a spike does not raise the bar
  CHECK(guard.spikes() == 2);
  CHECK(guard.on_step(6, true, 0.0).skip);
  CHECK(guard.on_step(7, true, 0.0).skip);
  CHECK_FALSE(guard.on_step(8, false, 1.0).skip);  // resets the consecutive count
  CHECK(guard.on_step(9, true, 0.0).skip);
  CHECK(guard.on_step(10, true, 0.0).skip);
  CHECK_THAT(testing::error_of([&] { guard.on_step(11, true, 0.0); }), Catch::Contains("step 11: 3 consecutive"));
  CHECK(guard.faults() == 5);

  train::NumericGuard off(3, 0.0);
  off.on_step(1, false, 1.0);
  CHECK_FALSE(off.on_step(2, false, 1e9).spike);
}

TEST_CASE("an existing run directory is never replaced without --overwrite, nor by a run that fails to load",
          "[reliability]") {
  const fs::path dir = testing::fresh_test_dir("run_dir");
  const fs::path config = write_config(dir);
  const fs::path run = dir / "run";
  REQUIRE(run_ptrain(train_args(config, run) + " --set train.max_steps=1 2>&1").exit_code == 0);
  const auto earlier = testing::tree_snapshot(run, {"ptrain.lock"});

  const CommandResult refused = run_ptrain(train_args(config, run) + " 2>&1");
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.output, Catch::Contains("output_dir '" + run.string() + "' already holds a run"));
  CHECK(testing::tree_snapshot(run, {"ptrain.lock"}) == earlier);

  // A bad dataset fails validation: the old run stays, even with --overwrite.
  testing::write_text_file(dir, "bad.jsonl", "{\"prompt\": \"a\"}\n");
  const std::string bad_data = " --set data.train=\"" + (dir / "bad.jsonl").string() + "\"";
  const CommandResult failed = run_ptrain(train_args(config, run) + bad_data + " --overwrite 2>&1");
  CHECK(failed.exit_code == 2);
  CHECK_THAT(failed.output, Catch::Contains((dir / "bad.jsonl").string() + ":1: missing field 'completion'"));
  CHECK(testing::tree_snapshot(run, {"ptrain.lock"}) == earlier);

  // A failed validation of a new run creates nothing.
  const CommandResult fresh_failed = run_ptrain(train_args(config, dir / "new_run") + bad_data + " 2>&1");
  CHECK(fresh_failed.exit_code == 2);
  CHECK_FALSE(fs::exists(dir / "new_run"));

  const CommandResult replaced = run_ptrain(train_args(config, run) + " --overwrite --set train.max_steps=2 2>&1");
  INFO(replaced.output);
  CHECK(replaced.exit_code == 0);
  CHECK(testing::read_metrics_jsonl(run / "metrics.jsonl").size() == 2);
  CHECK(fs::exists(run / "final" / "model.safetensors"));
}
