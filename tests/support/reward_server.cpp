#include "support/reward_server.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>
#include <string>

namespace ptrain::testing {

RewardServer::RewardServer() {
  int to_server[2];
  int from_server[2];
  if (::pipe(to_server) != 0 || ::pipe(from_server) != 0) throw std::runtime_error("reward server: no pipes");
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("reward server: fork failed");
  if (pid_ == 0) {
    ::dup2(to_server[0], STDIN_FILENO);
    ::dup2(from_server[1], STDOUT_FILENO);
    ::close(to_server[1]);
    ::close(from_server[0]);
    const std::string script = std::string(PTRAIN_TEST_FIXTURE_DIR) + "/rewards/reward_server.py";
    ::execl(PTRAIN_PYTHON, PTRAIN_PYTHON, script.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(to_server[0]);
  ::close(from_server[1]);
  stdin_ = to_server[1];
  FILE* output = ::fdopen(from_server[0], "r");
  const bool listening = std::fscanf(output, "%d", &port_) == 1;  // printed once it listens
  std::fclose(output);
  if (!listening) {
    ::close(stdin_);
    ::waitpid(pid_, nullptr, 0);
    throw std::runtime_error(std::string("reward server: reward_server.py printed no port (does ") + PTRAIN_PYTHON +
                             " run? scripts/python-env.sh makes it)");
  }
}

RewardServer::~RewardServer() {
  ::close(stdin_);  // the server shuts down at the end of its input
  ::waitpid(pid_, nullptr, 0);
}

std::string RewardServer::url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + path;
}

}  // namespace ptrain::testing
