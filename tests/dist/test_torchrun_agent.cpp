// Under torchrun (PyTorch 2.x), the agent serves the rendezvous store itself
// and tells its workers so with TORCHELASTIC_USE_AGENT_STORE=True; a rank 0
// that tried to serve the store too would find the port taken. Shown here
// with a store this test serves, as torchrun's agent does, and two ranks
// started with torchrun's variables.
#include "catch.h"

#include "dist/dist_test_support.h"
#include "support/run_command.h"

#include "core/dist/c10d_compat.h"
#include "core/dist/launch_env.h"
#include "core/dist/launcher.h"
#include "core/dist/rendezvous.h"

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <string>

using namespace ptrain;

namespace {

// The variables torchrun gives rank `rank` of 2 when its agent holds the store.
std::string torchrun_worker_env(int rank, int port) {
  return "env RANK=" + std::to_string(rank) + " LOCAL_RANK=" + std::to_string(rank) +
         " WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) +
         " TORCHELASTIC_USE_AGENT_STORE=True TORCHELASTIC_RESTART_COUNT=0";
}

}  // namespace

TEST_CASE("torchrun's agent store: every rank joins it, under a prefix per restart attempt", "[dist][torchrun]") {
  REQUIRE(std::getenv("RANK") == nullptr);
  const dist_test::ScopedEnv env({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "4000"}});
  CHECK(dist::read_launch_env().agent_store_prefix.empty());
  {
    const dist_test::ScopedEnv agent({{"TORCHELASTIC_USE_AGENT_STORE", "True"}, {"TORCHELASTIC_RESTART_COUNT", "2"}});
    CHECK(dist::read_launch_env().agent_store_prefix == "/worker/attempt_2");
  }
  const dist_test::ScopedEnv not_agent({{"TORCHELASTIC_USE_AGENT_STORE", "False"}, {"TORCHELASTIC_RESTART_COUNT", "3"}});
  CHECK(dist::read_launch_env().agent_store_prefix.empty());
}

TEST_CASE("a store that no longer answers is named by who served it: rank 0, or torchrun's agent",
          "[dist][torchrun]") {
  dist::LaunchEnv launch;
  launch.master_addr = "node01";
  launch.master_port = 29500;
  CHECK(dist::store_gone_message(launch) ==
        "rank 0 is gone: the rendezvous store it served at node01:29500 no longer answers "
        "(rank 0 died or its node was lost)");
  launch.agent_store_prefix = "/worker/attempt_0";
  const std::string agent = dist::store_gone_message(launch);
  CHECK(agent ==
        "the rendezvous store torchrun's agent served at node01:29500 no longer answers "
        "(that agent stopped, or its node was lost)");
  CHECK_THAT(agent, !Catch::Contains("rank 0"));
}

TEST_CASE("two ranks under a torchrun agent's store form one job with the world-size-2 results", "[dist][torchrun]") {
  const int port = dist::pick_free_port();
  c10d::TCPStoreOptions options = dist::c10d_compat::store_options();
  options.port = static_cast<uint16_t>(port);
  options.isServer = true;
  options.waitWorkers = false;
  options.timeout = std::chrono::seconds(60);
  const auto agent_store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
  const std::string worker = std::string(PTRAIN_DIST_WORKER) + " metrics";
  const testing::CommandResult ranks = testing::run_command(
      "{ " + torchrun_worker_env(1, port) + " " + worker + " & rank1=$!; " + torchrun_worker_env(0, port) + " " +
      worker + "; rank0=$?; wait $rank1; exit $((rank0 | $?)); }");
  INFO(ranks.output);
  REQUIRE(ranks.exit_code == 0);
  dist_test::check_global_metrics(dist_test::results_by_rank(ranks.output), 2);
}
