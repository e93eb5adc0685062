// Under Slurm, `srun ptrain train` works with no launcher: each task reads its
// rank, the world size and its local rank from Slurm's variables, shown here
// by starting the tasks with those variables set, as srun would.
#include "catch.h"

#include "dist/dist_test_support.h"
#include "integration/small_sft_run.h"
#include "support/run_command.h"
#include "support/test_util.h"

#include "core/dist/launch_env.h"
#include "core/dist/launcher.h"

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace ptrain;
using testing::CommandResult;

namespace {

// The variables srun gives task `rank` of a 2-task job on one node, with no
// MASTER_ADDR, so the rendezvous host comes from the node list.
std::string slurm_task_env(int rank, int port) {
  return "env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u MASTER_ADDR SLURM_PROCID=" + std::to_string(rank) +
         " SLURM_NTASKS=2 SLURM_LOCALID=" + std::to_string(rank) +
         " SLURM_NODEID=0 SLURM_TASKS_PER_NODE='2' SLURM_JOB_NODELIST=localhost MASTER_PORT=" + std::to_string(port);
}

// Both tasks of the job at once, their output interleaved; fails if either fails.
CommandResult run_two_slurm_tasks(const std::string& command) {
  const int port = dist::pick_free_port();
  return testing::run_command("{ " + slurm_task_env(1, port) + " " + command + " & task1=$!; " +
                              slurm_task_env(0, port) + " " + command +
                              "; task0=$?; wait $task1; exit $((task0 | $?)); }");
}

}  // namespace

TEST_CASE("Slurm's variables give rank, world, local world size and the rendezvous host", "[dist][slurm]") {
  REQUIRE(std::getenv("RANK") == nullptr);
  SECTION("task 5 of 12 on the second node of 4(x2),4") {
    const dist_test::ScopedEnv env({{"SLURM_PROCID", "5"},
                         {"SLURM_NTASKS", "12"},
                         {"SLURM_LOCALID", "1"},
                         {"SLURM_NODEID", "1"},
                         {"SLURM_TASKS_PER_NODE", "4(x2),4"},
                         {"SLURM_JOB_NODELIST", "gpu[07-08],cpu1"}});
    const dist::LaunchEnv launch = dist::read_launch_env();
    CHECK(launch.source == "slurm");
    CHECK(launch.rank == 5);
    CHECK(launch.world_size == 12);
    CHECK(launch.local_rank == 1);
    CHECK(launch.local_world_size == 4);
    CHECK(launch.master_addr == "gpu07");
    CHECK(launch.master_port == 29500);
  }
  SECTION("MASTER_ADDR wins over the node list, and SLURM_NODELIST serves when the job's list is absent") {
    const dist_test::ScopedEnv env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_NODELIST", "n1,n2"}});
    CHECK(dist::read_launch_env().master_addr == "n1");
    const dist_test::ScopedEnv master({{"MASTER_ADDR", "10.0.0.9"}, {"MASTER_PORT", "4000"}});
    CHECK(dist::read_launch_env().master_addr == "10.0.0.9");
    CHECK(dist::read_launch_env().master_port == 4000);
  }
  SECTION("missing or malformed variables are named") {
    const dist_test::ScopedEnv env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}});
    CHECK_THAT(testing::error_of([] { dist::read_launch_env(); }), Catch::Contains("SLURM_JOB_NODELIST"));
    const dist_test::ScopedEnv tasks({{"SLURM_JOB_NODELIST", "n1"}, {"SLURM_TASKS_PER_NODE", "2(y2)"}});
    CHECK_THAT(testing::error_of([] { dist::read_launch_env(); }),
               Catch::Contains("SLURM_TASKS_PER_NODE='2(y2)' is not Slurm's"));
  }
}

TEST_CASE("SLURM_TASKS_PER_NODE is read per node, with its repeat counts", "[dist][slurm]") {
  CHECK(dist::slurm_tasks_on_node("8", 0) == 8);
  CHECK(dist::slurm_tasks_on_node("4(x2),3", 0) == 4);
  CHECK(dist::slurm_tasks_on_node("4(x2),3", 1) == 4);
  CHECK(dist::slurm_tasks_on_node("4(x2),3", 2) == 3);
  CHECK_THAT(testing::error_of([] { dist::slurm_tasks_on_node("4(x2),3", 3); }),
             Catch::Contains("SLURM_NODEID=3 names a node beyond"));
  for (const std::string bad : {"", "0", "x", "4(x0)", "4(x2", "4,,3", "4,", "4(x2)5"}) {
    INFO(bad);
    CHECK_THAT(testing::error_of([&] { dist::slurm_tasks_on_node(bad, 0); }), Catch::Contains("SLURM_TASKS_PER_NODE"));
  }
  CHECK(dist::first_slurm_host("node[03-05,9],gpu1") == "node03");
  CHECK(dist::first_slurm_host("login2") == "login2");
}

TEST_CASE("two tasks started as srun starts them form one job with the world-size-2 results", "[dist][slurm]") {
  const CommandResult tasks = run_two_slurm_tasks(std::string(PTRAIN_DIST_WORKER) + " metrics");
  INFO(tasks.output);
  REQUIRE(tasks.exit_code == 0);
  dist_test::check_global_metrics(dist_test::results_by_rank(tasks.output), 2);
}

TEST_CASE("ptrain train as two Slurm tasks trains what one process trains", "[dist][slurm]") {
  const fs::path dir = testing::fresh_test_dir("slurm_train");
  const fs::path alone = testing::write_small_sft_config(dir, "alone", 0.002);
  const fs::path tasks = testing::write_small_sft_config(dir, "tasks", 0.002);
  REQUIRE(testing::run_ptrain("train -c " + alone.string()).exit_code == 0);
  const CommandResult srun_like = run_two_slurm_tasks(std::string(PTRAIN_EXE) + " train -c " + tasks.string());
  INFO(srun_like.output);
  REQUIRE(srun_like.exit_code == 0);
  CHECK_THAT(srun_like.output, Catch::Contains("world size 2"));
  const auto expected = testing::read_metrics_jsonl(dir / "alone" / "metrics.jsonl");
  const auto got = testing::read_metrics_jsonl(dir / "tasks" / "metrics.jsonl");
  REQUIRE(got.size() == expected.size());
  REQUIRE_FALSE(got.empty());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("record " << i);
    CHECK(got[i]["step"] == expected[i]["step"]);
    CHECK(got[i]["loss"].get<double>() == Approx(expected[i]["loss"].get<double>()).epsilon(1e-5));
    CHECK(got[i]["grad_norm"].get<double>() == Approx(expected[i]["grad_norm"].get<double>()).epsilon(1e-4));
  }
}
