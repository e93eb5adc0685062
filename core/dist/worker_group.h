// The launcher's worker processes as a group: stopped together, reaped
// without blocking, and failing fast: the first worker to exit non-zero
// stops the others, and its exit code becomes the launcher's.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <vector>

namespace ptrain::dist {

class WorkerGroup {
 public:
  // stop_grace_s: how long stopped workers get before SIGKILL.
  explicit WorkerGroup(double stop_grace_s) : stop_grace_s_(stop_grace_s) {}

  void add(int rank, pid_t pid);

  // Sends signal_number to every worker still running. The first stop also
  // starts the grace period that kill_if_overdue() enforces.
  void stop(int signal_number);
  // Sends signal_number to every worker still running, with no grace
  // period: a stop request the workers answer in their own time (a
  // checkpoint after the current step).
  void forward(int signal_number);
  // SIGKILL to the workers still running once the grace period is over.
  void kill_if_overdue();

  // Reaps every worker that has exited. The first one to exit non-zero before
  // any stop is the failed rank: it is announced and the others are stopped.
  void reap_exited();
  bool all_exited() const { return running_ == 0; }

  // Once all have exited: 0 when every worker exited 0; else the failed rank's
  // exit code, or after a stop the first non-zero one by rank (128 + signal
  // number for a signal), with a line on stderr that names the rank.
  int report_exit_code() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Worker {
    int rank = 0;
    pid_t pid = -1;
    bool exited = false;
    int exit_code = 0;
  };
  void on_exit(Worker& worker, int wait_status);

  double stop_grace_s_;
  std::vector<Worker> workers_;
  size_t running_ = 0;
  std::optional<int> failed_rank_;
  int failed_code_ = 0;
  std::optional<Clock::time_point> kill_deadline_;
};

}  // namespace ptrain::dist
