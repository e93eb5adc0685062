// The one live line at the bottom of a terminal, where progress bars are
// drawn. Log lines must not interleave with it: the logger's console sink
// (status_aware_sink) removes the line, prints the log line, and redraws it.
#pragma once

#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

// Only core/log's sources include spdlog (core/log/CMakeLists.txt says why).
namespace spdlog::sinks {
class sink;
}  // namespace spdlog::sinks

namespace ptrain::log {

class StatusLine {
 public:
  // `stream` is where the logger's console sink writes too (stderr in ptrain).
  StatusLine(std::FILE* stream, bool enabled) : stream_(stream), enabled_(enabled) {}

  // The process's status line on stderr. It is process-wide because stderr
  // is; init_logging enables it on rank 0 when stderr is a terminal.
  static StatusLine& for_stderr();

  void set_enabled(bool enabled);
  bool enabled() const;

  // Replaces the line's text (cut to the terminal width, so it never wraps).
  void show(const std::string& text);
  // Removes the line for good (the end of a phase or of training).
  void clear();
  // Runs `write` (which prints whole lines to the stream) with the line
  // removed, then draws it again below what was written.
  void write_above(const std::function<void()>& write);

 private:
  void erase_locked();
  void draw_locked();

  mutable std::mutex mutex_;
  std::FILE* stream_;
  bool enabled_;
  bool drawn_ = false;
  std::string text_;
};

// A sink that writes through `inner` with the status line moved out of the way.
std::shared_ptr<spdlog::sinks::sink> status_aware_sink(std::shared_ptr<spdlog::sinks::sink> inner, StatusLine& status);

bool is_terminal(std::FILE* stream);
// Columns of the terminal on `stream`, or 0 when it is not a terminal or does not say.
int terminal_columns(std::FILE* stream);

}  // namespace ptrain::log
