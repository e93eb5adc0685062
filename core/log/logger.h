// The process's logger: spdlog with the rank in every line, "[component] message"
// as the message shape; the console shows info on rank 0 only, warnings and
// errors on every rank; each rank's log file keeps all of its own lines.
// Every component logs through it; plugins reach it through plugin::HostLogger.
#pragma once

#include <filesystem>
#include <string_view>

namespace ptrain::log {

// Sets up the default spdlog logger for this rank (console on stderr).
void init_logging(int rank);
// Adds a log file (every rank writes its own: log_rank<R>.txt) under `dir`.
// It holds the rank's info lines too, which the console shows for rank 0 only.
void add_log_file(const std::filesystem::path& dir, int rank);
// Writes the line that ends the process with an error (main prints it on
// stderr) to the log file too, when there is one, so each rank's file says
// why it stopped.
void record_fatal_error(std::string_view line);

void info(std::string_view component, std::string_view message);
void warn(std::string_view component, std::string_view message);
void error(std::string_view component, std::string_view message);

}  // namespace ptrain::log
