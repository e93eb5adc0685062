#include "core/app/cli.h"

#include "core/app/cli_commands.h"
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

}  // namespace

int run_cli(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    return dispatch(args);
  } catch (const sdk::UsageError& error) {
    std::cerr << "ptrain: usage error: " << error.what() << "\n";
    return kExitUsage;
  } catch (const boost::program_options::error& error) {
    std::cerr << "ptrain: usage error: " << error.what() << "\n";
    return kExitUsage;
  } catch (const sdk::ConfigError& error) {
    std::cerr << "ptrain: config error: " << error.what() << "\n";
    return kExitUsage;
  } catch (const sdk::DataError& error) {
    std::cerr << "ptrain: data error: " << error.what() << "\n";
    return kExitUsage;
  } catch (const sdk::Error& error) {
    std::cerr << "ptrain: error: " << error.what() << "\n";
    return kExitRuntime;
  } catch (const c10::Error& error) {
    // TORCH_CHECK failures: the first line says what; the rest is a C++ backtrace.
    const std::string message = error.what_without_backtrace();
    std::cerr << "ptrain: error: " << message.substr(0, message.find('\n')) << "\n";
    return kExitRuntime;
  } catch (const std::exception& error) {
    std::cerr << "ptrain: error: " << error.what() << "\n";
    return kExitRuntime;
  }
}

}  // namespace ptrain::app
