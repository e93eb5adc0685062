// Ranks that would not run the same thing stop before the first step, every
// one of them, naming the ranks and what differs: the resume point (a
// node-local output_dir without the checkpoint), config keys, data, the
// plugin; and under sharding "optimizer" an output_dir the ranks do not
// share is found at start, not at the first checkpoint (docs/distributed.md).
#include "catch.h"

#include "support/run_command.h"

#include <filesystem>
#include <fstream>
#include <string>

namespace fs = std::filesystem;
using ptrain::testing::CommandResult;
using ptrain::testing::run_command;
using ptrain::testing::run_ptrain;

namespace {

fs::path write_config(const fs::path& dir) {
  const fs::path path = dir / "agree.toml";
  std::ofstream(path) << "plugin = \"sft\"\nseed = 2\n"
                      << "[model]\nvocab_size = 259\nhidden_size = 32\nintermediate_size = 64\nnum_layers = 1\n"
                      << "num_heads = 2\nnum_kv_heads = 1\nmax_position_embeddings = 32\n"
                      << "[data]\ntrain = \"" << PTRAIN_SOURCE_DIR << "/data/arith/train.jsonl\"\nmax_length = 16\n"
                      << "[batch]\nglobal_size = 8\n[optim]\nlr = 3e-3\n"
                      << "[train]\nmax_steps = 4\nlog_every = 1\n[checkpoint]\nevery_steps = 2\n"
                      << "[runtime]\nthreads = 1\n";
  return path;
}

// `ptrain launch --nproc 2` of `ptrain train -c config ARGS`, where ARGS is
// shell text that may read $RANK (each rank's own output_dir, say).
CommandResult launch_two(const fs::path& config, const std::string& rank_arguments) {
  return run_ptrain("launch --nproc 2 -- sh -c 'exec " + std::string(PTRAIN_EXE) + " train -c " + config.string() +
                    " " + rank_arguments + "'");
}

// Text that $RANK makes rank 0's or rank 1's.
std::string per_rank(const std::string& for_rank0, const std::string& for_rank1) {
  return "$( [ $RANK = 0 ] && echo " + for_rank0 + " || echo " + for_rank1 + " )";
}

// Both ranks stopped with `message`, before any step.
void check_both_stopped(const CommandResult& result, const std::string& message) {
  INFO(result.output);
  CHECK(result.exit_code == 2);
  for (const std::string rank : {"[rank 0] ", "[rank 1] "}) {
    CHECK_THAT(result.output, Catch::Contains(rank + "ptrain: config error: the ranks do not run the same thing, so "
                                                     "every rank stops before the first step: " + message));
  }
  CHECK_THAT(result.output, !Catch::Contains("step 1/"));
}

}  // namespace

TEST_CASE("a rank that would resume another checkpoint, or none, stops every rank before the first step",
          "[dist][agreement]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("agree_resume");
  const fs::path config = write_config(dir);
  // Node 0's output_dir holds the checkpoint after step 4; node 1's is empty.
  REQUIRE(run_ptrain("train -c " + config.string() + " --set output_dir=\\\"" + (dir / "node0").string() + "\\\"")
              .exit_code == 0);
  const std::string checkpoints = (dir / "node0" / "checkpoints" / "step_4").string();
  const CommandResult result = launch_two(config, "--set output_dir=\\\"" + dir.string() + "/node$RANK\\\"" +
                                                      " --set train.max_steps=8 --resume auto");
  check_both_stopped(result, "rank 1: the resume point is a fresh start at step 0 (no checkpoint found) (rank 0: "
                             "the checkpoint after step 4 of run ");
  CHECK_THAT(result.output, Catch::Contains(checkpoints));
  // Nothing trained on: rank 0's run is as the first invocation left it.
  std::ifstream metrics(dir / "node0" / "metrics.jsonl");
  int lines = 0;
  for (std::string line; std::getline(metrics, line);) ++lines;
  CHECK(lines == 4);
  CHECK_FALSE(fs::exists(dir / "node0" / "checkpoints" / "step_6"));
}

TEST_CASE("ranks given another config key, other data or another plugin are named with what differs",
          "[dist][agreement]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("agree_inputs");
  const fs::path config = write_config(dir);
  const std::string output_dir = " --set output_dir=\\\"" + dir.string() + "/run$RANK\\\"";

  SECTION("a learning rate") {
    check_both_stopped(launch_two(config, output_dir + " --set optim.lr=" + per_rank("3e-3", "1e-3")),
                       "rank 1: config keys optim.lr = 0.001 (rank 0: 0.003)");
  }
  SECTION("a shuffled and a longer data file") {
    const std::string data = std::string(PTRAIN_SOURCE_DIR) + "/data/arith/train.jsonl";
    REQUIRE(run_command("tac " + data + " > " + (dir / "shuffled.jsonl").string()).exit_code == 0);
    REQUIRE(run_command("cat " + data + " " + data + " > " + (dir / "longer.jsonl").string()).exit_code == 0);
    for (const std::string name : {"shuffled.jsonl", "longer.jsonl"}) {
      const fs::path copy = dir / ("same_" + name);  // rank 0 reads the original under the same name
      fs::copy_file(data, copy, fs::copy_options::overwrite_existing);
      const CommandResult result =
          launch_two(config, output_dir + " --set data.train=\\\"" +
                                 per_rank(copy.string(), (dir / name).string()) + "\\\"");
      // The paths differ too; the contents are what the data aspect names.
      check_both_stopped(result, "rank 1: data.train is " + (dir / name).string() + " (content ");
      CHECK_THAT(result.output, Catch::Contains("(rank 0: " + copy.string() + " (content "));
    }
  }
  SECTION("another build of the plugin") {
    const fs::path plugin = dir / "libptrain_plugin_sft.so";
    REQUIRE(run_command("cp " + std::string(PTRAIN_SFT_PLUGIN) + " " + plugin.string() + " && printf x >> " +
                        plugin.string() + " && chmod 755 " + plugin.string())
                .exit_code == 0);
    const CommandResult result =
        launch_two(config, output_dir + " --set plugin=\\\"" + per_rank(PTRAIN_SFT_PLUGIN, plugin.string()) + "\\\"");
    check_both_stopped(result, "rank 1: the plugin is sft ");
    CHECK_THAT(result.output, Catch::Contains("config keys plugin = \"" + plugin.string()));
  }
}

TEST_CASE("under sharding \"optimizer\" an output_dir the ranks do not share is refused at start", "[dist][agreement]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("agree_shared_dir");
  const fs::path config = write_config(dir);
  const CommandResult result = launch_two(config, "--set output_dir=\\\"" + dir.string() + "/node$RANK\\\"" +
                                                      " --set distributed.sharding=\\\"optimizer\\\"");
  INFO(result.output);
  CHECK(result.exit_code == 1);
  CHECK_THAT(result.output, Catch::Contains("[rank 0] ptrain: error: output_dir '" + (dir / "node0").string() +
                                            "': rank 0 does not see the files rank(s) 1 wrote there"));
  CHECK_THAT(result.output, Catch::Contains("[rank 1] ptrain: error: output_dir '" + (dir / "node1").string()));
  CHECK_FALSE(fs::exists(dir / "node0" / "metrics.jsonl"));
  // The probes are gone; a shared output_dir passes and trains.
  CHECK_FALSE(fs::exists(dir / "node0" / ".ptrain-shared-probe.rank0"));
  const CommandResult shared = launch_two(config, "--set output_dir=\\\"" + dir.string() + "/shared\\\"" +
                                                      " --set distributed.sharding=\\\"optimizer\\\"");
  INFO(shared.output);
  CHECK(shared.exit_code == 0);
  for (const auto& entry : fs::directory_iterator(dir / "shared")) {
    CHECK(entry.path().filename().string().rfind(".ptrain-shared-probe", 0) != 0);
  }
}
