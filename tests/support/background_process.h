// A command run in the background for the tests that signal, kill or race a
// running process: its pid, its output in a file, its exit as a shell reports it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

namespace ptrain::testing {

class BackgroundProcess {
 public:
  // Runs `command` through /bin/sh (exec'd, so pid() is the command's own),
  // stdout and stderr into `output`.
  BackgroundProcess(const std::string& command, std::filesystem::path output);
  // Kills (SIGKILL) and reaps the process if it still runs.
  ~BackgroundProcess();
  BackgroundProcess(const BackgroundProcess&) = delete;
  BackgroundProcess& operator=(const BackgroundProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Everything it printed so far.
  std::string output() const;
  // Waits until its output holds `text` (true), it exits, or `limit` passes.
  bool wait_for_output(const std::string& text, std::chrono::milliseconds limit);
  // Whether it has exited (reaping it if so); exit_code() then holds its code.
  bool exited();
  // Waits at most `limit` for the exit; kills it (SIGKILL) when it runs longer.
  // Returns the exit code: 128 + the signal for a signal, as a shell says.
  int wait(std::chrono::milliseconds limit);
  int exit_code() const { return exit_code_; }
  // The pids of its child processes (a launcher's workers), from /proc.
  std::vector<pid_t> children() const;

 private:
  pid_t pid_ = -1;
  std::filesystem::path output_;
  bool exited_ = false;
  int exit_code_ = -1;
};

}  // namespace ptrain::testing
