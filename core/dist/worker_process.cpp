#include "core/dist/worker_process.h"

#include "ptrain/sdk/errors.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <csignal>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ptrain::dist {
namespace {

void set_torchrun_env(const LaunchEnv& env) {
  ::setenv("RANK", std::to_string(env.rank).c_str(), 1);
  ::setenv("LOCAL_RANK", std::to_string(env.local_rank).c_str(), 1);
  ::setenv("WORLD_SIZE", std::to_string(env.world_size).c_str(), 1);
  ::setenv("LOCAL_WORLD_SIZE", std::to_string(env.local_world_size).c_str(), 1);
  ::setenv("MASTER_ADDR", env.master_addr.c_str(), 1);
  ::setenv("MASTER_PORT", std::to_string(env.master_port).c_str(), 1);
}

// In the forked child: never returns.
[[noreturn]] void exec_worker(const std::vector<std::string>& argv, const LaunchEnv& env, int stdout_fd, int stderr_fd,
                              pid_t launcher) {
  // A worker outlives no launcher: one killed outright (a node lost) takes
  // its workers along, so their peers on other nodes see the ranks go rather
  // than orphans holding the job's ports.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != launcher) ::_exit(128 + SIGKILL);  // it died before the line above
  set_torchrun_env(env);
  ::dup2(stdout_fd, STDOUT_FILENO);
  ::dup2(stderr_fd, STDERR_FILENO);
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  ::execvp(args[0], args.data());
  std::fprintf(stderr, "launch: cannot run %s: %s\n", args[0], std::strerror(errno));
  ::_exit(127);
}

}  // namespace

StartedWorker start_worker_process(const std::vector<std::string>& argv, const LaunchEnv& env) {
  // Close-on-exec: the program a worker runs keeps these pipes only as its
  // stdout and stderr, and none of the other workers' read ends.
  int out_pipe[2];
  int err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    throw sdk::Error(std::string("launch: pipe failed: ") + std::strerror(errno));
  }
  const pid_t launcher = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw sdk::Error(std::string("launch: fork failed: ") + std::strerror(errno));
  if (pid == 0) exec_worker(argv, env, out_pipe[1], err_pipe[1], launcher);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  return StartedWorker{pid, out_pipe[0], err_pipe[0]};
}

}  // namespace ptrain::dist
