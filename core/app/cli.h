// Command-line entry: parses `ptrain <command> [options]`, runs the command,
// and turns errors into one line on stderr and an exit code
// (0 ok, 2 usage or config error, 1 runtime failure).
#pragma once

namespace ptrain::app {

int run_cli(int argc, char** argv);

}  // namespace ptrain::app
