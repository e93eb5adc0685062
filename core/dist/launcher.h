// `ptrain launch`: runs N worker processes on this machine with torchrun's
// environment, prefixes their output with the rank, passes SIGTERM and
// SIGUSR1 on and waits for the workers' stop checkpoint, passes SIGINT on,
// and when one fails stops the others and exits non-zero naming it. On
// several machines, one launcher per node with torchrun's --nnodes,
// --node-rank, --master-addr and --master-port: node r runs ranks
// r·nproc … r·nproc + nproc − 1, and all rendezvous at rank 0's address.
#pragma once

#include <set>
#include <string>
#include <vector>

namespace ptrain::dist {

struct LaunchOptions {
  int nproc = 1;        // workers on this node
  int nnodes = 1;       // nodes in the job, each with its own launcher and nproc workers
  int node_rank = 0;    // this node's place among them (0 hosts rank 0 and the rendezvous)
  int master_port = 0;  // 0: a free port picked now (a single node only)
  std::string master_addr = "127.0.0.1";
  // After `--`: a ptrain command (train, validate, ...) run with this
  // executable, or any other program (like torchrun --no-python).
  std::vector<std::string> command;
  // The names that make command[0] a ptrain command (the app's command table).
  std::set<std::string> ptrain_commands;
  double stop_grace_s = 5.0;  // after a failure or Ctrl-C: SIGTERM or SIGINT, then SIGKILL after this long
};

// Returns 0 when every worker exits 0; else the exit code of the first
// worker that failed (128 + signal number for a signal).
int run_launcher(const LaunchOptions& options);

// A TCP port on 127.0.0.1 that nothing listens on right now.
int pick_free_port();

}  // namespace ptrain::dist
