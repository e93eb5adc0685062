#include "support/run_command.h"

#include "core/checkpoint/remove_tree.h"
#include "support/scratch_dir.h"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <stdexcept>

namespace ptrain::testing {

CommandResult run_command(const std::string& command) {
  const auto start = std::chrono::steady_clock::now();
  CommandResult result;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("cannot run: " + command);
  std::array<char, 4096> buffer{};
  while (std::fgets(buffer.data(), buffer.size(), pipe) != nullptr) result.output += buffer.data();
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

CommandResult run_ptrain(const std::string& arguments) { return run_command(std::string(PTRAIN_EXE) + " " + arguments); }

CommandResult run_ptrain_in(const std::filesystem::path& cwd, const std::string& arguments) {
  return run_command("cd '" + cwd.string() + "' && " + PTRAIN_EXE + " " + arguments);
}

std::filesystem::path fresh_test_dir(const std::string& name) {
  const std::filesystem::path dir = scratch_root() / name;
  checkpoint::remove_tree(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace ptrain::testing
