#include "core/app/cli.h"

#include "core/app/cli_commands.h"
#include "core/log/logger.h"
#include "ptrain/sdk/errors.h"
#include "ptrain/sdk/plugin.h"

#include <c10/util/Exception.h>
#include <boost/program_options/errors.hpp>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

namespace ptrain::app {
namespace {

// The column where the overview's command summaries start, after "  NAME".
constexpr size_t kSummaryColumn = 11;

void print_overview() {
  std::cout << "ptrain: post-training for causal language models (SFT, DPO, GRPO as plugins)\n"
               "\n"
               "usage: ptrain <command> [options]\n"
               "\n"
               "commands:\n";
  for (const CliCommand& command : cli_commands()) {
    std::string name = command.name;
    name.resize(std::max(kSummaryColumn, name.size() + 1), ' ');
    std::cout << "  " << name << command.summary << "\n";
  }
  std::cout << "\n"
               "  ptrain <command> --help   options of a command\n"
               "  ptrain --version          versions of ptrain, its SDK ABI and LibTorch\n";
}

void print_version() {
  std::cout << "ptrain " << PTRAIN_VERSION << " (SDK " << sdk::kSdkVersion << ", SDK ABI " << sdk::kAbiVersion
            << ", LibTorch " << PTRAIN_TORCH_VERSION << ")\n";
}

std::string command_names() {
  std::string names;
  for (const CliCommand& command : cli_commands()) names += (names.empty() ? "" : ", ") + std::string(command.name);
  return names;
}

int dispatch(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    print_overview();
    return args.empty() ? kExitUsage : kExitOk;
  }
  if (args[0] == "--version") {
    print_version();
    return kExitOk;
  }
  const CliCommand* command = find_cli_command(args[0]);
  if (command == nullptr) {
    throw sdk::UsageError("unknown command '" + args[0] + "' (commands: " + command_names() + "; see ptrain --help)");
  }
  return command->run(*command, std::vector<std::string>(args.begin() + 1, args.end()));
}

// The one line that ends the process with an error: on stderr, and in the
// rank's log file when the run directory has one.
int fail(const std::string& kind, const std::string& message, int exit_code) {
  const std::string line = "ptrain: " + kind + ": " + message;
  std::cerr << line << "\n";
  log::record_fatal_error(line);
  return exit_code;
}

}  // namespace

int run_cli(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    return dispatch(args);
  } catch (const sdk::UsageError& error) {
    return fail("usage error", error.what(), kExitUsage);
  } catch (const boost::program_options::error& error) {
    return fail("usage error", error.what(), kExitUsage);
  } catch (const sdk::ConfigError& error) {
    return fail("config error", error.what(), kExitUsage);
  } catch (const sdk::DataError& error) {
    return fail("data error", error.what(), kExitUsage);
  } catch (const sdk::Error& error) {
    return fail("error", error.what(), kExitRuntime);
  } catch (const c10::Error& error) {
    // TORCH_CHECK failures: the first line says what; the rest is a C++ backtrace.
    const std::string message = error.what_without_backtrace();
    return fail("error", message.substr(0, message.find('\n')), kExitRuntime);
  } catch (const std::exception& error) {
    return fail("error", error.what(), kExitRuntime);
  }
}

}  // namespace ptrain::app
