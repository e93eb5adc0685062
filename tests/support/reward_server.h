// tests/fixtures/rewards/reward_server.py in a child process (CMake's PTRAIN_PYTHON), for the tests
// of HTTP rewards: it listens on a free port of 127.0.0.1 until this object
// goes (its stdin closes).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>

namespace ptrain::testing {

class RewardServer {
 public:
  RewardServer();  // throws std::runtime_error when the server does not start
  ~RewardServer();
  RewardServer(const RewardServer&) = delete;
  RewardServer& operator=(const RewardServer&) = delete;

  // http://127.0.0.1:<port><path>
  std::string url(const std::string& path) const;

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  int port_ = 0;
};

}  // namespace ptrain::testing
