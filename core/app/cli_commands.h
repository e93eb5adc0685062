// The `ptrain` commands as one table: each command's name, its line in the
// overview (`ptrain --help`), its usage, and the function that parses its
// options and runs it. The overview and the unknown-command message list the
// commands from here, so they cannot drift from what dispatch accepts.
#pragma once

#include <string>
#include <vector>

namespace ptrain::app {

inline constexpr int kExitOk = 0;
inline constexpr int kExitRuntime = 1;  // the command failed
inline constexpr int kExitUsage = 2;    // bad input: arguments, config or data

struct CliCommand {
  const char* name;
  const char* summary;  // its overview line, after the name
  const char* usage;    // the rest of "usage: ptrain NAME ..." in `ptrain NAME --help`
  // Parses the arguments after the name and runs the command; returns the
  // exit code (0 after printing --help). Throws sdk errors.
  int (*run)(const CliCommand& command, const std::vector<std::string>& arguments);
};

// In overview order.
const std::vector<CliCommand>& cli_commands();

// nullptr when no command has this name.
const CliCommand* find_cli_command(const std::string& name);

}  // namespace ptrain::app
