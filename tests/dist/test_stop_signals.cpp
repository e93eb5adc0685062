// Stop signals (SIGTERM, SIGUSR1) at any point of a run: the run saves its
// stop checkpoint and exits 0, never crashes, alone or under `ptrain launch`,
// and the launcher passes them on and waits for that checkpoint
// (docs/checkpoints.md, docs/distributed.md).
//
// Each run gets a storm of signals, one every half millisecond from a chosen
// moment until it exits, so that signals land in every phase of the step it
// stops after (forwards and backwards in oneDNN's GEMM, the optimizer, the
// collectives), in the checkpoint's save and in the exit. Before the fix a
// storm crashed about every second run of this model, in free() after
// oneDNN's JIT sgemm (core/dist/process_signals.h). PTRAIN_STOP_STRESS_RUNS
// sets how many single-process runs (default 4; each launch case runs once
// more per 4).
#include "catch.h"

#include "core/dist/launcher.h"
#include "support/background_process.h"
#include "support/run_command.h"

#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ptrain::testing::BackgroundProcess;

namespace {

// An SFT run whose steps spend most of their time in float32 GEMMs, one
// intra-op thread per rank, no cadence checkpoints: the only one is the stop's.
fs::path write_stress_config(const fs::path& dir) {
  const fs::path path = dir / "stress.toml";
  std::ofstream(path) << "plugin = \"sft\"\nseed = 5\n"
                      << "[model]\nvocab_size = 259\nhidden_size = 128\nintermediate_size = 256\nnum_layers = 4\n"
                      << "num_heads = 4\nnum_kv_heads = 2\nmax_position_embeddings = 64\n"
                      << "[data]\ntrain = \"" << PTRAIN_SOURCE_DIR << "/data/arith/train.jsonl\"\nmax_length = 32\n"
                      << "[batch]\nglobal_size = 16\nmicro_size = 8\n"
                      << "[optim]\nlr = 1e-3\n[schedule]\nname = \"constant\"\n"
                      << "[train]\nmax_steps = 100000\nlog_every = 1\n"
                      << "[checkpoint]\nevery_steps = 0\n"
                      << "[runtime]\nthreads = 1\n";
  return path;
}

int stress_runs() {
  const char* text = std::getenv("PTRAIN_STOP_STRESS_RUNS");
  return text != nullptr && std::atoi(text) > 0 ? std::atoi(text) : 4;
}

std::string train_command(const fs::path& config, const fs::path& run) {
  return std::string(PTRAIN_EXE) + " train -c " + config.string() + " --set output_dir=\"" + run.string() + "\"";
}

// Signals `target()` every half millisecond, SIGTERM and SIGUSR1 in turn,
// until `process` exits; bounded by `limit`. Returns the exit code.
template <class Target>
int storm_until_exit(BackgroundProcess& process, Target target, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (int sent = 0; !process.exited() && std::chrono::steady_clock::now() < deadline; ++sent) {
    for (const pid_t pid : target()) ::kill(pid, sent % 2 == 0 ? SIGTERM : SIGUSR1);
    std::this_thread::sleep_for(500us);
  }
  return process.wait(5s);
}

// The step the checkpoint `latest` names under run/checkpoints, or -1.
int latest_step(const fs::path& run) {
  std::ifstream latest(run / "checkpoints" / "latest");
  std::string name;
  latest >> name;
  return name.rfind("step_", 0) == 0 ? std::stoi(name.substr(5)) : -1;
}

int metric_lines(const fs::path& run) {
  std::ifstream in(run / "metrics.jsonl");
  int lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  return lines;
}

}  // namespace

TEST_CASE("a storm of stop signals at any point of a run never crashes it: it saves the stop checkpoint and exits 0",
          "[dist][signals]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("stop_signal_storm");
  const fs::path config = write_stress_config(dir);
  fs::path last_run;
  for (int run_index = 0; run_index < stress_runs(); ++run_index) {
    // From the command's first line (set-up: loading, tokenizing) to a few steps in.
    const auto start_after = std::chrono::milliseconds(run_index * 700 % 2500);
    const fs::path run = dir / ("run" + std::to_string(run_index));
    BackgroundProcess process(train_command(config, run), dir / ("run" + std::to_string(run_index) + ".log"));
    REQUIRE(process.wait_for_output("[plugin] loaded", 120s));
    std::this_thread::sleep_for(start_after);
    const int exit_code = storm_until_exit(process, [&] { return std::vector<pid_t>{process.pid()}; }, 180s);
    INFO("run " << run_index << ", storm from " << start_after.count() << " ms after set-up began\n"
                << process.output());
    REQUIRE(exit_code == 0);
    CHECK_THAT(process.output(), Catch::Contains("stopped on request after step"));
    // The stop checkpoint is the run's last step.
    CHECK(latest_step(run) == metric_lines(run));
    CHECK(latest_step(run) >= 1);
    last_run = run;
  }
  // The stop checkpoint is complete: it resumes (every file checked against its manifest).
  const ptrain::testing::CommandResult resumed =
      ptrain::testing::run_ptrain("train -c " + write_stress_config(dir).string() + " --set output_dir=\"" +
                                  last_run.string() + "\" --set train.max_steps=" +
                                  std::to_string(latest_step(last_run) + 1) + " --resume auto");
  INFO(resumed.output);
  CHECK(resumed.exit_code == 0);
}

TEST_CASE("a storm of stop signals at the launcher or at one rank stops both ranks after the same step, cleanly",
          "[dist][signals]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("stop_signal_storm_launch");
  const fs::path config = write_stress_config(dir);
  const int rounds = std::max(1, stress_runs() / 4);
  for (int round = 0; round < rounds; ++round) {
    for (const bool at_launcher : {true, false}) {
      const std::string name = std::string(at_launcher ? "launcher" : "rank1") + std::to_string(round);
      const fs::path run = dir / name;
      BackgroundProcess launcher(std::string(PTRAIN_EXE) + " launch --nproc 2 -- " +
                                     train_command(config, run).substr(std::string(PTRAIN_EXE).size() + 1),
                                 dir / (name + ".log"));
      REQUIRE(launcher.wait_for_output("[rank 0]", 120s));
      REQUIRE(launcher.wait_for_output("[train] step 1/", 300s));
      // Rank 1 is the launcher's second child (started in rank order).
      const auto target = [&]() -> std::vector<pid_t> {
        if (at_launcher) return {launcher.pid()};
        std::vector<pid_t> workers = launcher.children();
        std::sort(workers.begin(), workers.end());
        return workers.size() == 2 ? std::vector<pid_t>{workers[1]} : std::vector<pid_t>{};
      };
      const int exit_code = storm_until_exit(launcher, target, 300s);
      INFO(name << "\n" << launcher.output());
      REQUIRE(exit_code == 0);
      CHECK_THAT(launcher.output(), Catch::Contains("stopped on request after step"));
      CHECK(latest_step(run) == metric_lines(run));
      if (at_launcher) CHECK_THAT(launcher.output(), Catch::Contains("passed on to the workers"));
    }
  }
}

TEST_CASE("launch passes SIGUSR1 and SIGTERM on and waits for the workers' stop however long it takes",
          "[dist][signals]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("launch_passes_stop_on");
  // Workers that take 6 s to "save" after a stop, longer than the 5 s grace
  // the launcher gives workers after a failure or Ctrl-C.
  const std::string worker = "sh -c 'trap \"sleep 6; echo saved; exit 0\" USR1 TERM; echo ready; "
                             "while :; do sleep 0.1; done'";
  for (const int signal_number : {SIGUSR1, SIGTERM}) {
    const std::string name = signal_number == SIGUSR1 ? "SIGUSR1" : "SIGTERM";
    BackgroundProcess launcher(std::string(PTRAIN_EXE) + " launch --nproc 2 -- " + worker, dir / (name + ".log"));
    REQUIRE(launcher.wait_for_output("[rank 1] ready", 60s));
    REQUIRE(launcher.wait_for_output("[rank 0] ready", 60s));
    const auto sent = std::chrono::steady_clock::now();
    ::kill(launcher.pid(), signal_number);
    const int exit_code = launcher.wait(60s);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
    INFO(name << "\n" << launcher.output());
    CHECK(exit_code == 0);
    CHECK(seconds >= 6.0);
    CHECK_THAT(launcher.output(), Catch::Contains("[launch] received " + name + "; passed on to the workers"));
    CHECK_THAT(launcher.output(), Catch::Contains("[rank 0] saved"));
    CHECK_THAT(launcher.output(), Catch::Contains("[rank 1] saved"));
  }
}
