#include "core/dist/launcher.h"

#include "core/dist/launch_env.h"
#include "core/dist/output_relay.h"
#include "core/dist/process_signals.h"
#include "core/dist/worker_group.h"
#include "core/dist/worker_process.h"
#include "ptrain/sdk/errors.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <set>

namespace ptrain::dist {
namespace {

std::string self_executable() {
  char buffer[4096];
  const ssize_t length = ::readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  if (length <= 0) throw sdk::Error("launch: cannot find the ptrain executable (/proc/self/exe)");
  return std::string(buffer, static_cast<size_t>(length));
}

// A ptrain command runs with this executable; anything else as it is.
std::vector<std::string> worker_argv(const LaunchOptions& options) {
  std::vector<std::string> argv = options.command;
  if (options.ptrain_commands.count(argv[0]) != 0) argv.insert(argv.begin(), self_executable());
  return argv;
}

// Where this node's worker `local_rank` sits in the job, as torchrun would tell it.
LaunchEnv worker_env(const LaunchOptions& options, int local_rank, int port) {
  LaunchEnv env;
  env.rank = options.node_rank * options.nproc + local_rank;
  env.local_rank = local_rank;
  env.world_size = options.nnodes * options.nproc;
  env.local_world_size = options.nproc;
  env.master_addr = options.master_addr;
  env.master_port = port;
  return env;
}

void start_workers(const LaunchOptions& options, const std::vector<std::string>& argv, int port, WorkerGroup& workers,
                   OutputRelay& relay) {
  for (int local_rank = 0; local_rank < options.nproc; ++local_rank) {
    const LaunchEnv env = worker_env(options, local_rank, port);
    const StartedWorker started = start_worker_process(argv, env);
    workers.add(env.rank, started.pid);
    relay.add(env.rank, started.stdout_fd, stdout);
    relay.add(env.rank, started.stderr_fd, stderr);
  }
  const int first_rank = options.node_rank * options.nproc;
  std::fprintf(stderr, "[launch] node %d of %d: started ranks %d-%d of %d (rendezvous %s:%d)\n", options.node_rank,
               options.nnodes, first_rank, first_rank + options.nproc - 1, options.nnodes * options.nproc,
               options.master_addr.c_str(), port);
}

// A stop request (SIGTERM: a scheduler's preemption or scancel; SIGUSR1:
// sbatch --signal) goes on to every worker, which saves a checkpoint after
// its current step and exits; the launcher waits for that however long it
// takes (a worker that cannot finish fails its collectives within
// distributed.timeout_s). Ctrl-C (SIGINT) goes on too, SIGKILL following
// after the grace period. Each kind is announced once.
void pass_on(int signal_number, WorkerGroup& workers, std::set<int>& announced) {
  const bool first = announced.insert(signal_number).second;
  if (signal_number == SIGINT) {
    if (first) std::fprintf(stderr, "[launch] received SIGINT; stopping the workers\n");
    workers.stop(SIGINT);
    return;
  }
  if (first) {
    std::fprintf(stderr,
                 "[launch] received %s; passed on to the workers, which save a checkpoint after their current step "
                 "and exit\n",
                 signal_name(signal_number));
  }
  workers.forward(signal_number);
}

// Until every worker has exited and all their output is relayed: passes
// caught signals on, escalates an overdue stop to SIGKILL, relays output, reaps.
void supervise(WorkerGroup& workers, OutputRelay& relay, CaughtSignals& signals) {
  std::set<int> announced;
  while (true) {
    while (const int signal_number = signals.take()) pass_on(signal_number, workers, announced);
    workers.kill_if_overdue();
    if (!relay.has_open_streams() && workers.all_exited()) break;
    if (relay.has_open_streams()) {
      relay.relay_ready(100);
    } else {
      ::usleep(50 * 1000);  // the workers closed their output but are still exiting
    }
    workers.reap_exited();
  }
}

}  // namespace

int pick_free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw sdk::Error("launch: cannot open a socket to find a free port");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof address;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(fd);
    throw sdk::Error("launch: cannot find a free port on 127.0.0.1");
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

int run_launcher(const LaunchOptions& options) {
  if (options.nproc < 1) throw sdk::UsageError("launch: --nproc must be at least 1");
  if (options.nnodes < 1) throw sdk::UsageError("launch: --nnodes must be at least 1");
  if (options.node_rank < 0 || options.node_rank >= options.nnodes) {
    throw sdk::UsageError("launch: --node-rank " + std::to_string(options.node_rank) + " is not in 0.." +
                          std::to_string(options.nnodes - 1) + " (--nnodes " + std::to_string(options.nnodes) + ")");
  }
  if (options.master_port < 0 || options.master_port > kMaxPort) {
    throw sdk::UsageError("launch: --master-port " + std::to_string(options.master_port) + " is not a TCP port (1-" +
                          std::to_string(kMaxPort) + "; 0: a free one)");
  }
  if (options.nnodes > 1 && options.master_port <= 0) {
    throw sdk::UsageError("launch: --nnodes " + std::to_string(options.nnodes) +
                          " needs --master-port: every node's launcher must name the same rendezvous port");
  }
  if (options.command.empty()) throw sdk::UsageError("launch: give the command after --, e.g. -- train -c FILE");
  const std::vector<std::string> argv = worker_argv(options);
  const int port = options.master_port > 0 ? options.master_port : pick_free_port();

  WorkerGroup workers(options.stop_grace_s);
  CaughtSignals signals;  // from before the first fork
  {
    OutputRelay relay;
    start_workers(options, argv, port, workers, relay);
    supervise(workers, relay, signals);
  }
  return workers.report_exit_code();
}

}  // namespace ptrain::dist
