#include "core/log/logger.h"

#include "core/log/status_line.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <string>

namespace ptrain::log {
namespace {

std::string pattern_for(int rank) { return "%H:%M:%S.%e r" + std::to_string(rank) + " %^%-5l%$ %v"; }

// The run's log file once add_log_file made it; null before.
std::shared_ptr<spdlog::sinks::sink>& log_file_sink() {
  static std::shared_ptr<spdlog::sinks::sink> sink;
  return sink;
}

}  // namespace

void init_logging(int rank) {
  std::shared_ptr<spdlog::sinks::sink> sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  // Rank 0 on a terminal draws progress bars; its log lines go above them.
  auto& status = StatusLine::for_stderr();
  status.set_enabled(rank == 0 && is_terminal(stderr));
  if (status.enabled()) sink = status_aware_sink(sink, status);
  // The console shows rank 0's info and every rank's warnings; each rank's
  // log file (add_log_file) keeps its info lines too.
  sink->set_level(rank == 0 ? spdlog::level::info : spdlog::level::warn);
  auto console = std::make_shared<spdlog::logger>("ptrain", sink);
  console->set_pattern(pattern_for(rank));
  console->set_level(spdlog::level::info);
  spdlog::register_logger(console);
  spdlog::set_default_logger(console);
}

void add_log_file(const std::filesystem::path& dir, int rank) {
  auto logger = spdlog::default_logger();
  auto file_sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(
      (dir / ("log_rank" + std::to_string(rank) + ".txt")).string());
  file_sink->set_pattern("%Y-%m-%d " + pattern_for(rank));
  logger->sinks().push_back(file_sink);
  logger->flush_on(spdlog::level::info);
  log_file_sink() = file_sink;
}

void record_fatal_error(std::string_view line) {
  const std::shared_ptr<spdlog::sinks::sink>& sink = log_file_sink();
  if (!sink) return;
  sink->log(spdlog::details::log_msg("ptrain", spdlog::level::err, line));
  sink->flush();
}

void info(std::string_view component, std::string_view message) { spdlog::info("[{}] {}", component, message); }
void warn(std::string_view component, std::string_view message) { spdlog::warn("[{}] {}", component, message); }
void error(std::string_view component, std::string_view message) { spdlog::error("[{}] {}", component, message); }

}  // namespace ptrain::log
