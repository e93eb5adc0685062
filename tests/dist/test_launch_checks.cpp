// The launch variables and the rendezvous through the real executable: an
// out-of-range MASTER_PORT or --master-port, a malformed Slurm node list, a
// missing rank or rank 0 (given up after distributed.timeout_s plus start-up),
// and nodes whose launchers were given different --nproc (docs/distributed.md).
#include "catch.h"

#include "core/dist/launcher.h"
#include "integration/small_sft_run.h"
#include "support/background_process.h"
#include "support/run_command.h"

#include <chrono>
#include <filesystem>
#include <string>

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ptrain::testing::BackgroundProcess;
using ptrain::testing::CommandResult;
using ptrain::testing::run_command;

namespace {

std::string train(const fs::path& config) { return std::string(PTRAIN_EXE) + " train -c " + config.string(); }

// Runs `ptrain train` as rank `rank` of `world` with torchrun's variables.
std::string as_rank(int rank, int world, int port, const fs::path& config, int timeout_s) {
  return "env RANK=" + std::to_string(rank) + " WORLD_SIZE=" + std::to_string(world) +
         " MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " " + train(config) +
         " --set distributed.timeout_s=" + std::to_string(timeout_s);
}

// Seconds from `start_line` in its output (or from its start, when empty)
// to the exit of a rank left alone at the rendezvous; its output in `output`.
double seconds_alone(const std::string& command, const std::string& start_line, const fs::path& log,
                     std::string& output, int& exit_code) {
  BackgroundProcess process(command, log);
  if (!start_line.empty()) REQUIRE(process.wait_for_output(start_line, 120s));
  const auto started = std::chrono::steady_clock::now();
  exit_code = process.wait(120s);
  output = process.output();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
}

}  // namespace

TEST_CASE("an out-of-range MASTER_PORT or --master-port and a malformed node list are refused naming them",
          "[dist][launch]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("launch_variables");
  const fs::path config = ptrain::testing::write_small_sft_config(dir, "run", 1e-3);
  for (const std::string port : {"95196", "65536", "0", "-1", "29500x"}) {
    INFO("MASTER_PORT=" << port);
    const CommandResult torchrun =
        run_command("env RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port + " " + train(config));
    CHECK(torchrun.exit_code == 2);
    CHECK_THAT(torchrun.output, Catch::Contains("environment variable MASTER_PORT"));
    const CommandResult slurm = run_command("env -u RANK SLURM_PROCID=0 SLURM_NTASKS=2 SLURM_JOB_NODELIST=n1 "
                                            "MASTER_PORT=" + port + " " + train(config));
    CHECK(slurm.exit_code == 2);
    CHECK_THAT(slurm.output, Catch::Contains("environment variable MASTER_PORT"));
  }
  for (const std::string port : {"95197", "65536", "-2"}) {
    const CommandResult launch = ptrain::testing::run_ptrain("launch --nproc 2 --master-port " + port + " -- train -c " +
                                                             config.string());
    INFO(launch.output);
    CHECK(launch.exit_code == 2);
    CHECK_THAT(launch.output, Catch::Contains("--master-port " + port + " is not a TCP port (1-65535"));
  }
  for (const std::string nodes : {"node[01-03", "node01-03]", "node[]", "node[a-b]", "n1,,n2", "n1,", "[01-02]"}) {
    INFO("SLURM_JOB_NODELIST=" << nodes);
    const CommandResult slurm = run_command("env -u RANK SLURM_PROCID=0 SLURM_NTASKS=2 SLURM_JOB_NODELIST='" + nodes +
                                            "' MASTER_PORT=29500 " + train(config));
    CHECK(slurm.exit_code == 2);
    CHECK_THAT(slurm.output, Catch::Contains("environment variable SLURM_JOB_NODELIST='" + nodes +
                                             "' is not a Slurm node list"));
  }
  const CommandResult old_name = run_command(
      "env -u RANK SLURM_PROCID=0 SLURM_NTASKS=2 SLURM_NODELIST='gpu[1-2' MASTER_PORT=29500 " + train(config));
  CHECK_THAT(old_name.output, Catch::Contains("environment variable SLURM_NODELIST='gpu[1-2' is not"));
}

TEST_CASE("the rendezvous gives up after distributed.timeout_s, naming the rank that did not come", "[dist][launch]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("rendezvous_timeout");
  const fs::path config = ptrain::testing::write_small_sft_config(dir, "run", 1e-3);
  constexpr int kTimeoutS = 6;
  std::string output;
  int exit_code = 0;

  SECTION("rank 1 never starts: rank 0 names it") {
    const double seconds =
        seconds_alone(as_rank(0, 2, ptrain::dist::pick_free_port(), config, kTimeoutS), "[plugin] loaded",
                      dir / "rank0.log", output, exit_code);
    INFO(output);
    CHECK(exit_code == 1);
    CHECK_THAT(output, Catch::Contains("rank 1 did not arrive within distributed.timeout_s = 6 s"));
    CHECK(seconds >= kTimeoutS - 0.5);
    CHECK(seconds < kTimeoutS + 4);  // LibTorch's own waits took twice the timeout, and 2 s more
  }
  SECTION("rank 0 never starts: rank 1 names it") {
    const double seconds =
        seconds_alone(as_rank(1, 2, ptrain::dist::pick_free_port(), config, kTimeoutS), "", dir / "rank1.log",
                      output, exit_code);
    INFO(output);
    CHECK(exit_code == 1);
    CHECK_THAT(output, Catch::Contains("cannot reach the rendezvous at 127.0.0.1:"));
    CHECK_THAT(output, Catch::Contains("which rank 0 serves, within distributed.timeout_s = 6 s"));
    // From the process's start (rank 1 logs nothing before): start-up
    // included. LibTorch's connect gives up once its next retry would pass
    // the deadline, so it may end up to one retry interval (~1 s) early.
    CHECK(seconds >= kTimeoutS - 1.0);
    CHECK(seconds < kTimeoutS + 30);
  }
}

TEST_CASE("launchers given different --nproc stop at the rendezvous with a world-size message, not a timeout",
          "[dist][launch]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("nproc_mismatch");
  const fs::path config = ptrain::testing::write_small_sft_config(dir, "run", 1e-3);
  const int port = ptrain::dist::pick_free_port();
  const auto node = [&](int node_rank, int nproc) {
    return std::string(PTRAIN_EXE) + " launch --nnodes 2 --node-rank " + std::to_string(node_rank) + " --nproc " +
           std::to_string(nproc) + " --master-port " + std::to_string(port) + " -- train -c " + config.string() +
           " --set distributed.timeout_s=300";
  };
  const auto started = std::chrono::steady_clock::now();
  BackgroundProcess node1(node(1, 1), dir / "node1.log");
  BackgroundProcess node0(node(0, 2), dir / "node0.log");
  const int node0_exit = node0.wait(200s);
  const int node1_exit = node1.wait(200s);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  INFO(node0.output() << "\n" << node1.output());
  CHECK(node0_exit == 1);
  CHECK(node1_exit == 1);
  CHECK(seconds < 150);  // far below distributed.timeout_s = 300
  const std::string message = "rank 1 has world size 2 (torchrun) but rank 0 has 4: every node's launcher must be "
                              "given the same --nproc and --nnodes";
  CHECK_THAT(node0.output(), Catch::Contains(message));
  CHECK_THAT(node1.output(), Catch::Contains(message));
}
