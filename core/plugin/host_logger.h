// The process's logger: spdlog with the rank in every line, "[component] message"
// as the message shape, info on rank 0 only, warnings and errors on every rank.
#pragma once

#include "ptrain/sdk/context.h"

#include <filesystem>
#include <string_view>

namespace ptrain::plugin {

// Sets up the default spdlog logger for this rank (console on stderr).
void init_logging(int rank);
// Adds a log file (every rank writes its own: log_rank<R>.txt) under `dir`.
void add_log_file(const std::filesystem::path& dir, int rank);

void log_info(std::string_view component, std::string_view message);
void log_warn(std::string_view component, std::string_view message);
void log_error(std::string_view component, std::string_view message);

// The SDK logger handed to plugins; forwards to the functions above.
class HostLogger final : public sdk::Logger {
 public:
  void info(std::string_view component, std::string_view message) override { log_info(component, message); }
  void warn(std::string_view component, std::string_view message) override { log_warn(component, message); }
  void error(std::string_view component, std::string_view message) override { log_error(component, message); }
};

}  // namespace ptrain::plugin
