// Starting one worker process of `ptrain launch`: torchrun's environment
// variables for its place in the job, its stdout and stderr into pipes the
// launcher reads.
#pragma once

#include "core/dist/launch_env.h"

#include <sys/types.h>

#include <string>
#include <vector>

namespace ptrain::dist {

struct StartedWorker {
  pid_t pid = -1;
  int stdout_fd = -1;  // read ends of the worker's output pipes, owned by the caller
  int stderr_fd = -1;
};

// Forks and execs argv (searched on PATH) with RANK, LOCAL_RANK, WORLD_SIZE,
// LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT set from `env` (the variables
// read_launch_env() reads back). A program that cannot be run exits 127 with
// a line on its stderr. Throws sdk::Error when a pipe or the fork fails.
StartedWorker start_worker_process(const std::vector<std::string>& argv, const LaunchEnv& env);

}  // namespace ptrain::dist
