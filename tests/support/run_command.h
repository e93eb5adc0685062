// Runs a shell command for the tests and captures what it printed.
#pragma once

#include <filesystem>
#include <string>

namespace ptrain::testing {

struct CommandResult {
  int exit_code = -1;   // 128 + signal when killed by a signal
  std::string output;   // stdout and stderr, interleaved
  double seconds = 0.0; // wall time
};

CommandResult run_command(const std::string& command);

// `ptrain <arguments>` with the built executable.
CommandResult run_ptrain(const std::string& arguments);
// The same, run in the working directory `cwd`.
CommandResult run_ptrain_in(const std::filesystem::path& cwd, const std::string& arguments);

// A new empty directory under the system temp dir, unique to this process.
std::filesystem::path fresh_test_dir(const std::string& name);

}  // namespace ptrain::testing
