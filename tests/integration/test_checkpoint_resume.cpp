// Checkpoints and resume through the `ptrain` executable: exact continuation,
// other world sizes, crashes while saving, corrupt files, SIGTERM.
#include "catch.h"

#include "support/test_util.h"

#include "support/run_command.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <set>

namespace fs = std::filesystem;
using ptrain::testing::CommandResult;
using ptrain::testing::run_command;
using ptrain::testing::run_ptrain;

namespace {

std::vector<nlohmann::json> read_run_metrics(const fs::path& run) {
  return ptrain::testing::read_metrics_jsonl(run / "metrics.jsonl");
}

fs::path write_config(const fs::path& dir) {
  const fs::path path = dir / "resume.toml";
  std::ofstream(path) << "plugin = \"sft\"\nseed = 3\n"
                      << "[model]\nvocab_size = 259\nhidden_size = 32\nintermediate_size = 64\nnum_layers = 2\n"
                      << "num_heads = 4\nnum_kv_heads = 2\nmax_position_embeddings = 32\n"
                      << "[data]\ntrain = \"" << PTRAIN_SOURCE_DIR << "/data/arith/train.jsonl\"\nmax_length = 16\n"
                      << "[batch]\nglobal_size = 8\nmicro_size = 4\n"
                      << "[optim]\nlr = 3e-3\n"
                      << "[schedule]\nname = \"cosine\"\nwarmup_steps = 2\n"
                      << "[train]\nmax_steps = 8\nlog_every = 4\n"
                      << "[checkpoint]\nevery_steps = 2\nkeep_last = 2\n";
  return path;
}

// A tiny DPO run of 8 steps on the bundled preference data, checkpointed every 2.
fs::path write_dpo_config(const fs::path& dir, int seed, int micro_size, const std::string& module_lines) {
  const fs::path path = dir / "dpo.toml";
  std::ofstream(path) << "plugin = \"dpo\"\nseed = " << seed << "\n"
                      << "[model]\nvocab_size = 259\nhidden_size = 32\nintermediate_size = 64\nnum_layers = 2\n"
                      << "num_heads = 4\nnum_kv_heads = 2\nmax_position_embeddings = 32\n"
                      << "[data]\ntrain = \"" << PTRAIN_SOURCE_DIR
                      << "/data/arith_prefs/train.jsonl\"\nmax_length = 16\n"
                      << "[batch]\nglobal_size = 8\nmicro_size = " << micro_size << "\n"
                      << "[optim]\nlr = 3e-3\n[schedule]\nname = \"constant\"\n"
                      << "[train]\nmax_steps = 8\nlog_every = 4\n"
                      << "[checkpoint]\nevery_steps = 2\nkeep_last = 2\n"
                      << "[module]\n"
                      << module_lines;
  return path;
}

std::string train_args(const fs::path& config, const fs::path& run, int max_steps) {
  return "train -c " + config.string() + " --set output_dir=\"" + run.string() +
         "\" --set train.max_steps=" + std::to_string(max_steps);
}

// Every metric but wall-clock ones and padding, which depends on the split.
void check_same_metrics(const std::vector<nlohmann::json>& actual, const std::vector<nlohmann::json>& expected,
                        double relative_tolerance) {
  static const std::set<std::string> timing{"step_s", "tokens_per_s", "mfu", "comm_s", "padded_tokens"};
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    for (const auto& [key, value] : expected[i].items()) {
      if (timing.count(key) != 0 || key.rfind("time/", 0) == 0) continue;  // the step-phase timers
      INFO("step " << expected[i]["step"] << ", metric " << key);
      REQUIRE(actual[i].contains(key));
      if (relative_tolerance == 0.0) {
        CHECK(actual[i][key] == value);
      } else {
        CHECK(actual[i][key].get<double>() == Approx(value.get<double>()).epsilon(relative_tolerance).margin(1e-12));
      }
    }
  }
}

}  // namespace

// With a constant schedule the learning rate of a step does not depend on
// max_steps, so 4 steps then 4 more are the same computation as 8.
const std::string kConstantSchedule = " --set schedule.name=constant";

TEST_CASE("stopping and resuming gives the metrics of an uninterrupted run, bit for bit", "[resume][device]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("resume_exact");
  const fs::path config = write_config(dir);
  REQUIRE(run_ptrain(train_args(config, dir / "straight", 8) + kConstantSchedule).exit_code == 0);

  const CommandResult first = run_ptrain(train_args(config, dir / "resumed", 4) + kConstantSchedule);
  REQUIRE(first.exit_code == 0);
  const CommandResult second =
      run_ptrain(train_args(config, dir / "resumed", 8) + kConstantSchedule + " --resume auto");
  INFO(second.output);
  REQUIRE(second.exit_code == 0);
  CHECK_THAT(second.output, Catch::Contains("continuing from"));
  CHECK_THAT(second.output, Catch::Contains("train.max_steps changed from 4 to 8"));
  check_same_metrics(read_run_metrics(dir / "resumed"), read_run_metrics(dir / "straight"), 0.0);

  // An explicit checkpoint path works too, and a changed model shape is refused.
  const CommandResult by_path = run_ptrain(train_args(config, dir / "by_path", 8) + kConstantSchedule + " --resume " +
                                           (dir / "resumed" / "checkpoints" / "step_6").string());
  CHECK(by_path.exit_code == 0);
  const CommandResult reshaped =
      run_ptrain(train_args(config, dir / "resumed", 8) + " --resume auto --set model.num_layers=3");
  CHECK(reshaped.exit_code == 2);
  CHECK_THAT(reshaped.output, Catch::Contains("differs in shape"));
}

TEST_CASE("a checkpoint from world size 2 resumes on world sizes 1 and 4 with the same batches", "[resume]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("resume_elastic");
  const fs::path config = write_config(dir);
  REQUIRE(run_ptrain("launch --nproc 2 -- " + train_args(config, dir / "straight", 8) + kConstantSchedule).exit_code ==
          0);
  const auto expected = read_run_metrics(dir / "straight");
  for (const int world : {1, 4}) {
    const fs::path run = dir / ("world" + std::to_string(world));
    REQUIRE(run_ptrain("launch --nproc 2 -- " + train_args(config, run, 4) + kConstantSchedule).exit_code == 0);
    const CommandResult resumed =
        run_ptrain("launch --nproc " + std::to_string(world) + " -- " + train_args(config, run, 8) + kConstantSchedule +
                   " --resume auto --set batch.micro_size=1");
    INFO(resumed.output);
    REQUIRE(resumed.exit_code == 0);
    CHECK_THAT(resumed.output, Catch::Contains("saved at world size 2"));
    check_same_metrics(read_run_metrics(run), expected, 1e-5);
  }
}

TEST_CASE("a crash at any point of a checkpoint write leaves a complete checkpoint to resume from", "[resume]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("resume_crash");
  const fs::path config = write_config(dir);
  REQUIRE(run_ptrain(train_args(config, dir / "straight", 8)).exit_code == 0);
  for (const std::string point : {"after_model", "before_rename", "before_latest", "before_prune"}) {
    INFO("killed at " << point);
    const fs::path run = dir / point;
    // Checkpoints every 2 steps: the second save (step 4) is killed at `point`.
    const CommandResult killed =
        run_command("PTRAIN_TEST_KILL_AT=" + point + ":2 " + PTRAIN_EXE + " " + train_args(config, run, 8));
    CHECK(killed.exit_code == 128 + 9);
    const CommandResult resumed = run_ptrain(train_args(config, run, 8) + " --resume auto");
    INFO(resumed.output);
    REQUIRE(resumed.exit_code == 0);
    check_same_metrics(read_run_metrics(run), read_run_metrics(dir / "straight"), 0.0);
  }
}

TEST_CASE("a corrupt, truncated, incomplete or foreign checkpoint is refused, naming the file", "[resume]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("resume_corrupt");
  const fs::path config = write_config(dir);
  REQUIRE(run_ptrain(train_args(config, dir / "other", 2)).exit_code == 0);
  const auto damaged_run = [&](const std::string& name) {
    const fs::path run = dir / name;
    REQUIRE(run_ptrain(train_args(config, run, 2)).exit_code == 0);
    return run / "checkpoints" / "step_2";
  };
  const auto resume_error = [&](const fs::path& checkpoint) {
    const CommandResult result =
        run_ptrain(train_args(config, checkpoint.parent_path().parent_path(), 4) + " --resume auto");
    CHECK(result.exit_code == 1);
    return result.output;
  };

  const fs::path flipped = damaged_run("flipped");
  {
    std::fstream file(flipped / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(200);
    file.put('\x7f');
  }
  CHECK_THAT(resume_error(flipped),
             Catch::Contains((flipped / "model.safetensors").string() + ": checksum differs from manifest.json"));

  const fs::path truncated = damaged_run("truncated");
  fs::resize_file(truncated / "optimizer.safetensors", fs::file_size(truncated / "optimizer.safetensors") / 2);
  CHECK_THAT(resume_error(truncated), Catch::Contains((truncated / "optimizer.safetensors").string() + ": "));
  CHECK_THAT(resume_error(truncated), Catch::Contains("truncated or replaced"));

  const fs::path missing = damaged_run("missing");
  fs::remove(missing / "trainer_state.json");
  CHECK_THAT(resume_error(missing), Catch::Contains((missing / "trainer_state.json").string() + ": missing"));

  const fs::path foreign = damaged_run("foreign");
  fs::copy_file(dir / "other" / "checkpoints" / "step_2" / "manifest.json", foreign / "manifest.json",
                fs::copy_options::overwrite_existing);
  CHECK_THAT(resume_error(foreign), Catch::Contains(foreign.string()));

  const fs::path incomplete = damaged_run("incomplete");
  fs::remove(incomplete / "manifest.json");
  CHECK_THAT(resume_error(incomplete), Catch::Contains((incomplete / "manifest.json").string() + ": missing"));
}

TEST_CASE("SIGTERM saves a checkpoint and exits cleanly, and resuming continues exactly", "[resume]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("resume_sigterm");
  const fs::path config = write_config(dir);
  const fs::path run = dir / "run";
  // A constant schedule, so that the learning rate does not depend on max_steps.
  const std::string constant = " --set schedule.name=constant";
  // Long enough to still be running when the signal comes. The signal is
  // sent once the first step is logged (the handler is installed before
  // training starts): a fixed delay raced with set-up on a loaded machine,
  // killing the process while it was still tokenizing. 300 s bound the wait.
  const std::string metrics = (run / "metrics.jsonl").string();
  const CommandResult stopped =
      run_command("sh -c '" + std::string(PTRAIN_EXE) + " " + train_args(config, run, 100000) + constant +
                  " --set checkpoint.every_steps=0 & pid=$!; i=0; while [ ! -s " + metrics +
                  " ] && [ $i -lt 1500 ]; do sleep 0.2; i=$((i+1)); done; kill -TERM $pid; wait $pid'");
  INFO(stopped.output);
  REQUIRE(stopped.exit_code == 0);
  CHECK_THAT(stopped.output, Catch::Contains("stopped on request after step"));
  std::ifstream latest(run / "checkpoints" / "latest");
  std::string name;
  latest >> name;
  REQUIRE(name.rfind("step_", 0) == 0);
  const int stopped_at = std::stoi(name.substr(5));
  CHECK(stopped_at >= 1);

  const int total = stopped_at + 3;
  const CommandResult resumed = run_ptrain(train_args(config, run, total) + constant + " --resume auto");
  REQUIRE(resumed.exit_code == 0);
  REQUIRE(run_ptrain(train_args(config, dir / "straight", total) + constant).exit_code == 0);
  check_same_metrics(read_run_metrics(run), read_run_metrics(dir / "straight"), 0.0);
}

TEST_CASE("DPO resumes exactly too, its reference still the starting model", "[resume][dpo][device]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("resume_dpo");
  const fs::path config = write_dpo_config(dir, 4, 4, "loss = [\"sigmoid\", \"sft\"]\nloss_weights = [1, 0.5]\n");
  REQUIRE(run_ptrain(train_args(config, dir / "straight", 8)).exit_code == 0);
  REQUIRE(run_ptrain(train_args(config, dir / "resumed", 4)).exit_code == 0);
  const CommandResult resumed = run_ptrain(train_args(config, dir / "resumed", 8) + " --resume auto");
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  check_same_metrics(read_run_metrics(dir / "resumed"), read_run_metrics(dir / "straight"), 0.0);
}

TEST_CASE("TR-DPO's synced reference and bco_pair's running mean survive a resume on 2 ranks, bit for bit",
          "[resume][dpo]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("resume_dpo_state");
  const fs::path config = write_dpo_config(dir, 5, 3,
                                           "loss = [\"bco_pair\", \"sigmoid\"]\nloss_weights = [1, 0.5]\n"
                                           "sync_reference = true\nsync_reference_steps = 3\n"
                                           "sync_reference_alpha = 0.5\n");
  const std::string launch = "launch --nproc 2 -- ";
  REQUIRE(run_ptrain(launch + train_args(config, dir / "straight", 8)).exit_code == 0);
  // Stopped after step 4: the reference was synced before step 4 (and will be
  // again before step 7), and δ holds the rewards of steps 1–4 of both ranks.
  REQUIRE(run_ptrain(launch + train_args(config, dir / "resumed", 4)).exit_code == 0);
  const CommandResult resumed = run_ptrain(launch + train_args(config, dir / "resumed", 8) + " --resume auto");
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  CHECK_THAT(resumed.output, Catch::Contains("resumed the TR-DPO reference as synced at step 4"));
  const auto expected = read_run_metrics(dir / "straight");
  REQUIRE(expected.size() == 8);
  CHECK(expected[4]["bco/delta"].get<double>() != 0.0);  // the state the resume must restore is not trivial
  check_same_metrics(read_run_metrics(dir / "resumed"), expected, 0.0);
}
