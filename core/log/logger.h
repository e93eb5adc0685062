// The process's logger: spdlog with the rank in every line, "[component] message"
// as the message shape, info on rank 0 only, warnings and errors on every rank.
// Every component logs through it; plugins reach it through plugin::HostLogger.
#pragma once

#include <filesystem>
#include <string_view>

namespace ptrain::log {

// Sets up the default spdlog logger for this rank (console on stderr).
void init_logging(int rank);
// Adds a log file (every rank writes its own: log_rank<R>.txt) under `dir`.
void add_log_file(const std::filesystem::path& dir, int rank);

void info(std::string_view component, std::string_view message);
void warn(std::string_view component, std::string_view message);
void error(std::string_view component, std::string_view message);

}  // namespace ptrain::log
