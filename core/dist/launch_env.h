// Where this process sits in the job, read from the launcher's environment:
// torchrun's variables (also set by `ptrain launch`), or Slurm's under srun.
#pragma once

#include <string>

namespace ptrain::dist {

struct LaunchEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string source = "single process";  // "torchrun", "slurm" or "single process"
  // Under torchrun's agent, which serves the store at MASTER_ADDR:MASTER_PORT
  // itself (TORCHELASTIC_USE_AGENT_STORE=True): every rank joins it as a
  // client, its keys under "/worker/attempt_<TORCHELASTIC_RESTART_COUNT>" so a
  // restarted attempt never reads the last one's. Empty: rank 0 serves the store.
  std::string agent_store_prefix;
};

// RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE/MASTER_ADDR/MASTER_PORT (and
// torchrun's TORCHELASTIC_USE_AGENT_STORE, TORCHELASTIC_RESTART_COUNT) when
// RANK is set; else SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID (master: the
// first host of SLURM_JOB_NODELIST, else SLURM_NODELIST, unless MASTER_ADDR
// is set; the local world size from SLURM_TASKS_PER_NODE) when SLURM_PROCID
// is set; else a single process. Throws sdk::ConfigError naming the variable
// that is missing or malformed (MASTER_PORT: not in 1..65535).
LaunchEnv read_launch_env();

// This node's task count in SLURM_TASKS_PER_NODE ("4(x2),3": nodes 0 and 1
// run 4, node 2 runs 3). Throws sdk::ConfigError on a malformed list.
int slurm_tasks_on_node(const std::string& tasks_per_node, int node_id);

// The first host of a Slurm node list: "node[03-05,9],gpu1" → "node03".
// Throws sdk::ConfigError naming `variable` when the list is malformed (an
// unclosed bracket, an empty host or range).
std::string first_slurm_host(const std::string& node_list, const std::string& variable = "SLURM_JOB_NODELIST");

// The largest TCP port; MASTER_PORT and --master-port are checked against it.
inline constexpr int kMaxPort = 65535;

}  // namespace ptrain::dist
