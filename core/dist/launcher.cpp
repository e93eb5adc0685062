#include "core/dist/launcher.h"

#include "ptrain/sdk/errors.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <set>

namespace ptrain::dist {
namespace {

using Clock = std::chrono::steady_clock;

volatile sig_atomic_t g_received_signal = 0;

void remember_signal(int signal_number) { g_received_signal = signal_number; }

struct Worker {
  int rank = 0;
  pid_t pid = -1;
  int out_fd = -1;  // the worker's stdout
  int err_fd = -1;  // the worker's stderr
  std::string out_partial;
  std::string err_partial;
  bool exited = false;
  int exit_code = 0;
};

const std::set<std::string>& ptrain_commands() {
  static const std::set<std::string> commands{"train", "validate", "plugins", "tokenize"};
  return commands;
}

std::string self_executable() {
  char buffer[4096];
  const ssize_t length = ::readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  if (length <= 0) throw sdk::Error("launch: cannot find the ptrain executable (/proc/self/exe)");
  return std::string(buffer, static_cast<size_t>(length));
}

// Writes complete lines of `chunk` to `out` with the rank prefix; keeps the rest.
void emit_lines(int rank, std::string& partial, const char* chunk, size_t size, FILE* out, bool flush_all) {
  partial.append(chunk, size);
  size_t start = 0;
  for (size_t newline; (newline = partial.find('\n', start)) != std::string::npos; start = newline + 1) {
    std::fprintf(out, "[rank %d] %.*s\n", rank, static_cast<int>(newline - start), partial.data() + start);
  }
  partial.erase(0, start);
  if (flush_all && !partial.empty()) {
    std::fprintf(out, "[rank %d] %s\n", rank, partial.c_str());
    partial.clear();
  }
  std::fflush(out);
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

pid_t start_worker(const LaunchOptions& options, const std::vector<std::string>& argv, int rank, int port, int out_pipe[2],
                   int err_pipe[2]) {
  const pid_t pid = ::fork();
  if (pid < 0) throw sdk::Error(std::string("launch: fork failed: ") + std::strerror(errno));
  if (pid > 0) return pid;

  // Child: torchrun's variables, output into the pipes, then the command.
  ::setenv("RANK", std::to_string(rank).c_str(), 1);
  ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
  ::setenv("WORLD_SIZE", std::to_string(options.nproc).c_str(), 1);
  ::setenv("LOCAL_WORLD_SIZE", std::to_string(options.nproc).c_str(), 1);
  ::setenv("MASTER_ADDR", options.master_addr.c_str(), 1);
  ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  ::dup2(out_pipe[1], STDOUT_FILENO);
  ::dup2(err_pipe[1], STDERR_FILENO);
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  ::execvp(args[0], args.data());
  std::fprintf(stderr, "launch: cannot run %s: %s\n", args[0], std::strerror(errno));
  ::_exit(127);
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
  if (options.command.empty()) throw sdk::UsageError("launch: give the command after --, e.g. -- train -c FILE");

  std::vector<std::string> argv = options.command;
  if (ptrain_commands().count(argv[0]) != 0) argv.insert(argv.begin(), self_executable());
  const int port = options.master_port > 0 ? options.master_port : pick_free_port();

  struct sigaction action {};
  action.sa_handler = remember_signal;
  ::sigemptyset(&action.sa_mask);
  struct sigaction previous_int {}, previous_term {};
  ::sigaction(SIGINT, &action, &previous_int);
  ::sigaction(SIGTERM, &action, &previous_term);

  std::vector<Worker> workers(options.nproc);
  for (int rank = 0; rank < options.nproc; ++rank) {
    int out_pipe[2];
    int err_pipe[2];
    if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
      throw sdk::Error(std::string("launch: pipe failed: ") + std::strerror(errno));
    }
    workers[rank].rank = rank;
    workers[rank].pid = start_worker(options, argv, rank, port, out_pipe, err_pipe);
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    workers[rank].out_fd = out_pipe[0];
    workers[rank].err_fd = err_pipe[0];
  }
  std::fprintf(stderr, "[launch] started %d workers (rendezvous %s:%d)\n", options.nproc, options.master_addr.c_str(),
               port);

  std::optional<int> failed_rank;
  int failed_code = 0;
  std::optional<Clock::time_point> kill_deadline;
  const auto stop_others = [&](int signal_number) {
    for (const Worker& worker : workers) {
      if (!worker.exited) ::kill(worker.pid, signal_number);
    }
    if (!kill_deadline) {
      kill_deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(options.stop_grace_s * 1000));
    }
  };

  size_t running = workers.size();
  while (true) {
    if (g_received_signal != 0) {
      std::fprintf(stderr, "[launch] received signal %d; forwarding it to the workers\n",
                   static_cast<int>(g_received_signal));
      stop_others(g_received_signal);
      g_received_signal = 0;
    }
    if (kill_deadline && Clock::now() > *kill_deadline) {
      stop_others(SIGKILL);
    }

    std::vector<pollfd> polls;
    std::vector<std::pair<Worker*, bool>> sources;  // worker, is_stderr
    for (Worker& worker : workers) {
      if (worker.out_fd >= 0) {
        polls.push_back({worker.out_fd, POLLIN, 0});
        sources.emplace_back(&worker, false);
      }
      if (worker.err_fd >= 0) {
        polls.push_back({worker.err_fd, POLLIN, 0});
        sources.emplace_back(&worker, true);
      }
    }
    if (polls.empty() && running == 0) break;
    if (!polls.empty()) ::poll(polls.data(), polls.size(), 100);
    for (size_t i = 0; i < polls.size(); ++i) {
      if ((polls[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      Worker& worker = *sources[i].first;
      const bool is_stderr = sources[i].second;
      char buffer[8192];
      const ssize_t count = ::read(polls[i].fd, buffer, sizeof buffer);
      std::string& partial = is_stderr ? worker.err_partial : worker.out_partial;
      FILE* out = is_stderr ? stderr : stdout;
      if (count > 0) {
        emit_lines(worker.rank, partial, buffer, static_cast<size_t>(count), out, false);
      } else if (count == 0 || errno != EINTR) {
        emit_lines(worker.rank, partial, "", 0, out, true);
        ::close(polls[i].fd);
        (is_stderr ? worker.err_fd : worker.out_fd) = -1;
      }
    }
    if (polls.empty()) ::usleep(50 * 1000);

    int status = 0;
    for (pid_t pid; running > 0 && (pid = ::waitpid(-1, &status, WNOHANG)) > 0;) {
      for (Worker& worker : workers) {
        if (worker.pid != pid) continue;
        worker.exited = true;
        worker.exit_code = exit_code_of(status);
        --running;
        if (worker.exit_code != 0 && !failed_rank && !kill_deadline) {
          failed_rank = worker.rank;
          failed_code = worker.exit_code;
          std::fprintf(stderr, "[launch] rank %d exited with code %d; stopping the other workers\n", worker.rank,
                       worker.exit_code);
          stop_others(SIGTERM);
        }
      }
    }
  }
  ::sigaction(SIGINT, &previous_int, nullptr);
  ::sigaction(SIGTERM, &previous_term, nullptr);

  if (failed_rank) {
    std::fprintf(stderr, "ptrain launch: rank %d failed (exit code %d)\n", *failed_rank, failed_code);
    return failed_code;
  }
  for (const Worker& worker : workers) {
    if (worker.exit_code != 0) {
      std::fprintf(stderr, "ptrain launch: stopped; rank %d exited with code %d\n", worker.rank, worker.exit_code);
      return worker.exit_code;
    }
  }
  return 0;
}

}  // namespace ptrain::dist
