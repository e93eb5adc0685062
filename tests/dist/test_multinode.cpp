// Several nodes: one `ptrain launch` per node with torchrun's --nnodes,
// --node-rank, --master-addr and --master-port, shown as two launchers on
// one machine (2 nodes × 2 ranks on 127.0.0.1), either of them killed outright.
#include "catch.h"

#include "dist/dist_test_support.h"
#include "support/run_command.h"

#include "core/dist/launcher.h"

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <regex>
#include <string>
#include <thread>
#include <vector>

namespace fs = std::filesystem;
using namespace ptrain;
using testing::CommandResult;
using testing::run_ptrain;

namespace {

std::string node_launch(int node_rank, int port, const std::string& worker_arguments) {
  return "launch --nnodes 2 --node-rank " + std::to_string(node_rank) + " --nproc 2 --master-addr 127.0.0.1" +
         " --master-port " + std::to_string(port) + " -- " + PTRAIN_DIST_WORKER + " " + worker_arguments;
}

// Starts node `node_rank`'s launcher in the background, its output in
// dir/node<R>.log; returns its pid.
pid_t start_node(int node_rank, int port, const std::string& worker_arguments, const fs::path& dir) {
  const std::string node = "node" + std::to_string(node_rank);
  const fs::path pid_file = dir / (node + ".pid");
  testing::run_command(std::string(PTRAIN_EXE) + " " + node_launch(node_rank, port, worker_arguments) + " > " +
                       (dir / (node + ".log")).string() + " 2>&1 < /dev/null & echo $! > " + pid_file.string());
  pid_t pid = 0;
  std::ifstream(pid_file) >> pid;
  return pid;
}

// Waits (at most `limit`) until `pid` is gone; true if it went.
bool wait_gone(pid_t pid, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (dist_test::process_alive(pid) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return !dist_test::process_alive(pid);
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("launch on node 1 of 2 gives its workers the job's ranks and their local ones", "[dist][multinode]") {
  const CommandResult node1 = run_ptrain(node_launch(1, 29321, "env"));
  INFO(node1.output);
  REQUIRE(node1.exit_code == 0);
  for (const int local_rank : {0, 1}) {
    const std::string prefix = "[rank " + std::to_string(2 + local_rank) + "] ";
    CHECK_THAT(node1.output, Catch::Contains(prefix + "RANK=" + std::to_string(2 + local_rank)));
    CHECK_THAT(node1.output, Catch::Contains(prefix + "LOCAL_RANK=" + std::to_string(local_rank)));
    CHECK_THAT(node1.output, Catch::Contains(prefix + "WORLD_SIZE=4"));
    CHECK_THAT(node1.output, Catch::Contains(prefix + "LOCAL_WORLD_SIZE=2"));
    CHECK_THAT(node1.output, Catch::Contains(prefix + "MASTER_PORT=29321"));
  }
  CHECK_THAT(node1.output, Catch::Contains("node 1 of 2: started ranks 2-3 of 4"));

  const CommandResult no_port = run_ptrain("launch --nnodes 2 --node-rank 0 --nproc 2 -- train");
  CHECK(no_port.exit_code == 2);
  CHECK_THAT(no_port.output, Catch::Contains("--nnodes 2 needs --master-port"));
  const CommandResult bad_node = run_ptrain("launch --nnodes 2 --node-rank 2 --nproc 2 --master-port 1 -- train");
  CHECK(bad_node.exit_code == 2);
  CHECK_THAT(bad_node.output, Catch::Contains("--node-rank 2 is not in 0..1"));
}

TEST_CASE("two launchers make one job of 2 nodes x 2 ranks with the world-size-4 results", "[dist][multinode]") {
  const fs::path dir = testing::fresh_test_dir("two_nodes");
  const int port = dist::pick_free_port();
  const pid_t node1 = start_node(1, port, "metrics", dir);
  REQUIRE(node1 > 0);
  const CommandResult node0 = run_ptrain(node_launch(0, port, "metrics"));
  REQUIRE(wait_gone(node1, std::chrono::seconds(60)));
  const std::string node1_output = read_text(dir / "node1.log");
  INFO(node0.output << "\n--- node 1:\n" << node1_output);
  REQUIRE(node0.exit_code == 0);
  auto by_rank = dist_test::results_by_rank(node0.output);
  CHECK(by_rank.size() == 2);
  for (const auto& [rank, values] : dist_test::results_by_rank(node1_output)) by_rank[rank] = values;
  dist_test::check_global_metrics(by_rank, 4);
}

namespace {

constexpr int kLoopTimeoutS = 4;  // the `loop` workers' collective timeout

struct LostNode {
  CommandResult survivor;  // the other node's launcher
  double seconds_after_kill = 0.0;
  std::vector<pid_t> workers;  // the four ranks'
};

// Two launchers of two `loop` workers each; once every rank runs, node
// `lost`'s launcher is killed outright. Returns how the other one ended.
LostNode lose_node(int lost, const fs::path& dir) {
  const fs::path pid_dir = dir / "pids";
  fs::create_directories(pid_dir);
  const std::string loop = "loop " + std::to_string(kLoopTimeoutS) + " " + pid_dir.string();
  const int port = dist::pick_free_port();
  const pid_t doomed = start_node(lost, port, loop, dir);
  REQUIRE(doomed > 0);
  auto survivor = std::async(std::launch::async, [&] { return run_ptrain(node_launch(1 - lost, port, loop)); });

  // Every rank writes its pid once the group is up; then the node goes at once.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  while (dist_test::read_pids(pid_dir).size() < 4 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  LostNode outcome;
  outcome.workers = dist_test::read_pids(pid_dir);
  REQUIRE(outcome.workers.size() == 4);
  const auto killed_at = std::chrono::steady_clock::now();
  ::kill(doomed, SIGKILL);
  outcome.survivor = survivor.get();
  outcome.seconds_after_kill = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  return outcome;
}

}  // namespace

TEST_CASE("a node killed outright ends the job on the other with an error naming its ranks", "[dist][multinode]") {
  const LostNode outcome = lose_node(1, testing::fresh_test_dir("node_dies"));
  const CommandResult& result = outcome.survivor;
  INFO(result.output);
  CHECK(result.exit_code != 0);
  CHECK(outcome.seconds_after_kill < kLoopTimeoutS + 20);
  CHECK_THAT(result.output, Catch::Contains("all_reduce(sum) failed"));
  // The node-0 rank that fails first names node 1's ranks as silent; its
  // node-0 peer may still wait in the same collective for it (until the
  // timeout, past the 2 s grace) and then is named too.
  CHECK(std::regex_search(result.output, std::regex("no word from rank ([01], )?2, 3 within")));
  CHECK_THAT(result.output, Catch::Contains("stopping the other workers"));
  // Node 1's workers went with their launcher (no orphans holding the job).
  for (const pid_t pid : outcome.workers) CHECK(wait_gone(pid, std::chrono::seconds(10)));
}

TEST_CASE("node 0 killed outright: the other node's ranks name rank 0, whose rendezvous store went with it",
          "[dist][multinode]") {
  const LostNode outcome = lose_node(0, testing::fresh_test_dir("node_zero_dies"));
  const CommandResult& result = outcome.survivor;
  INFO(result.output);
  CHECK(result.exit_code != 0);
  CHECK(outcome.seconds_after_kill < kLoopTimeoutS + 20);
  CHECK_THAT(result.output, Catch::Contains("failed"));
  CHECK_THAT(result.output, Catch::Contains("rank 0 is gone: the rendezvous store it served at 127.0.0.1:"));
  CHECK_THAT(result.output, Catch::Contains("no longer answers (rank 0 died or its node was lost)"));
}
