#include "core/dist/worker_group.h"

#include <signal.h>
#include <sys/wait.h>

#include <cstdint>
#include <cstdio>

namespace ptrain::dist {
namespace {

// A shell's convention: the exit status, or 128 + the signal that ended it.
int exit_code_of(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

}  // namespace

void WorkerGroup::add(int rank, pid_t pid) {
  workers_.push_back(Worker{rank, pid});
  ++running_;
}

void WorkerGroup::forward(int signal_number) {
  for (const Worker& worker : workers_) {
    if (!worker.exited) ::kill(worker.pid, signal_number);
  }
}

void WorkerGroup::stop(int signal_number) {
  forward(signal_number);
  if (!kill_deadline_) {
    kill_deadline_ = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(stop_grace_s_ * 1000));
  }
}

void WorkerGroup::kill_if_overdue() {
  if (kill_deadline_ && Clock::now() > *kill_deadline_) stop(SIGKILL);
}

void WorkerGroup::reap_exited() {
  int status = 0;
  for (pid_t pid; running_ > 0 && (pid = ::waitpid(-1, &status, WNOHANG)) > 0;) {
    for (Worker& worker : workers_) {
      if (worker.pid == pid) on_exit(worker, status);
    }
  }
}

void WorkerGroup::on_exit(Worker& worker, int wait_status) {
  worker.exited = true;
  worker.exit_code = exit_code_of(wait_status);
  --running_;
  // After a stop, non-zero exits are the stop's doing, not a failure.
  if (worker.exit_code == 0 || failed_rank_ || kill_deadline_) return;
  failed_rank_ = worker.rank;
  failed_code_ = worker.exit_code;
  std::fprintf(stderr, "[launch] rank %d exited with code %d; stopping the other workers\n", worker.rank,
               worker.exit_code);
  stop(SIGTERM);
}

int WorkerGroup::report_exit_code() const {
  if (failed_rank_) {
    std::fprintf(stderr, "ptrain launch: rank %d failed (exit code %d)\n", *failed_rank_, failed_code_);
    return failed_code_;
  }
  for (const Worker& worker : workers_) {
    if (worker.exit_code != 0) {
      std::fprintf(stderr, "ptrain launch: stopped; rank %d exited with code %d\n", worker.rank, worker.exit_code);
      return worker.exit_code;
    }
  }
  return 0;
}

}  // namespace ptrain::dist
