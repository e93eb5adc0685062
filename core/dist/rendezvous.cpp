#include "core/dist/rendezvous.h"

#include "core/dist/c10d_compat.h"
#include "ptrain/sdk/errors.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

namespace ptrain::dist {
namespace {

using Clock = std::chrono::steady_clock;

const std::string kKeys = "ptrain/rendezvous/";
const std::string kProblemKey = kKeys + "problem";
const std::string kWorldSizeKey = kKeys + "world_size";
const std::string kArrivedKey = kKeys + "arrived";
std::string rank_key(int rank) { return kKeys + "rank" + std::to_string(rank); }

std::vector<uint8_t> bytes_of(const std::string& text) { return {text.begin(), text.end()}; }
std::string text_of(const std::vector<uint8_t>& bytes) { return {bytes.begin(), bytes.end()}; }

std::string first_line(const std::exception& error) {
  const std::string text = error.what();
  return text.substr(0, text.find('\n'));
}

class Meeting {
 public:
  Meeting(c10d::Store& store, const LaunchEnv& launch, std::chrono::seconds timeout, Clock::time_point deadline)
      : store_(store), launch_(launch), timeout_(timeout), deadline_(deadline) {}

  void run() {
    check_world_size();
    if (store_.add(rank_key(launch_.rank), 1) > 1) {
      fail_for_everyone("two processes claim rank " + std::to_string(launch_.rank) +
                        ": give every node's launcher its own --node-rank (and the same --nproc)");
    }
    store_.add(kArrivedKey, 1);
    auto pause = std::chrono::milliseconds(10);
    while (store_.add(kArrivedKey, 0) < launch_.world_size) {
      stop_if_reported();
      if (Clock::now() >= deadline_) throw sdk::Error(prefix() + absent_ranks() + " did not arrive within " + limit());
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(200));
    }
    stop_if_reported();
  }

 private:
  // Rank 0 publishes its world size; every other rank compares its own.
  void check_world_size() {
    if (launch_.rank == 0) {
      store_.set(kWorldSizeKey, bytes_of(std::to_string(launch_.world_size)));
      return;
    }
    while (!store_.check({kWorldSizeKey})) {
      stop_if_reported();
      if (Clock::now() >= deadline_) throw sdk::Error(prefix() + "rank 0 did not arrive within " + limit());
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const std::string root_world_size = text_of(store_.get(kWorldSizeKey));
    if (root_world_size != std::to_string(launch_.world_size)) {
      fail_for_everyone("rank " + std::to_string(launch_.rank) + " has world size " +
                        std::to_string(launch_.world_size) + " (" + launch_.source + ") but rank 0 has " +
                        root_world_size +
                        ": every node's launcher must be given the same --nproc and --nnodes (under Slurm, "
                        "the same SLURM_NTASKS)");
    }
  }

  [[noreturn]] void fail_for_everyone(const std::string& problem) {
    store_.set(kProblemKey, bytes_of(problem));
    throw sdk::Error(prefix() + problem);
  }

  void stop_if_reported() {
    if (store_.check({kProblemKey})) throw sdk::Error(prefix() + text_of(store_.get(kProblemKey)));
  }

  std::string absent_ranks() {
    std::string names;
    int count = 0;
    for (int rank = 0; rank < launch_.world_size; ++rank) {
      if (store_.check({rank_key(rank)})) continue;
      names += (names.empty() ? "" : ", ") + std::to_string(rank);
      ++count;
    }
    return (count == 1 ? "rank " : "ranks ") + names;
  }

  std::string limit() const {
    return "distributed.timeout_s = " + std::to_string(timeout_.count()) +
           " s (not started, failed before the rendezvous, or given another MASTER_ADDR/MASTER_PORT)";
  }

  std::string prefix() const {
    return "rank " + std::to_string(launch_.rank) + " of " + std::to_string(launch_.world_size) + ": rendezvous at " +
           launch_.master_addr + ":" + std::to_string(launch_.master_port) + ": ";
  }

  c10d::Store& store_;
  const LaunchEnv& launch_;
  std::chrono::seconds timeout_;
  Clock::time_point deadline_;
};

c10::intrusive_ptr<c10d::Store> connect(const LaunchEnv& launch, std::chrono::seconds timeout) {
  c10d::TCPStoreOptions options = c10d_compat::store_options();
  options.port = static_cast<uint16_t>(launch.master_port);  // checked to be a port (launch_env.h)
  options.isServer = launch.rank == 0 && launch.agent_store_prefix.empty();  // else torchrun's agent serves it
  options.numWorkers = launch.world_size;
  options.waitWorkers = false;  // the meeting waits, under one deadline
  options.timeout = timeout;
  const std::string where = launch.master_addr + ":" + std::to_string(launch.master_port);
  try {
    c10::intrusive_ptr<c10d::Store> store = c10::make_intrusive<c10d::TCPStore>(launch.master_addr, options);
    if (launch.agent_store_prefix.empty()) return store;
    return c10::make_intrusive<c10d::PrefixStore>(launch.agent_store_prefix, store);
  } catch (const std::exception& error) {
    if (options.isServer) {
      throw sdk::Error("rank 0 of " + std::to_string(launch.world_size) + ": cannot serve the rendezvous at " + where +
                       " (is MASTER_PORT in use, or MASTER_ADDR not this host?): " + first_line(error));
    }
    throw sdk::Error("rank " + std::to_string(launch.rank) + " of " + std::to_string(launch.world_size) +
                     ": cannot reach the rendezvous at " + where + ", which rank 0 serves, within " +
                     "distributed.timeout_s = " + std::to_string(timeout.count()) +
                     " s: rank 0 has not started, failed, or is on another address: " + first_line(error));
  }
}

}  // namespace

c10::intrusive_ptr<c10d::Store> rendezvous(const LaunchEnv& launch, std::chrono::seconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  c10::intrusive_ptr<c10d::Store> store = connect(launch, timeout);
  try {
    Meeting(*store, launch, timeout, deadline).run();
  } catch (const sdk::Error&) {
    throw;
  } catch (const std::exception& error) {
    throw sdk::Error("rank " + std::to_string(launch.rank) + " of " + std::to_string(launch.world_size) +
                     ": rendezvous at " + launch.master_addr + ":" + std::to_string(launch.master_port) +
                     " failed (rank 0, which serves it, may have died): " + first_line(error));
  }
  return store;
}

std::string store_gone_message(const LaunchEnv& launch) {
  const std::string where = launch.master_addr + ":" + std::to_string(launch.master_port);
  if (!launch.agent_store_prefix.empty()) {
    return "the rendezvous store torchrun's agent served at " + where +
           " no longer answers (that agent stopped, or its node was lost)";
  }
  return "rank 0 is gone: the rendezvous store it served at " + where +
         " no longer answers (rank 0 died or its node was lost)";
}

}  // namespace ptrain::dist
