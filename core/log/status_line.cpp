#include "core/log/status_line.h"

#include <spdlog/details/log_msg.h>
#include <spdlog/formatter.h>
#include <spdlog/sinks/sink.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>

namespace ptrain::log {
namespace {

// "\r" returns to column 0; "ESC [ K" erases to the end of the line.
constexpr const char* kEraseLine = "\r\033[K";

class StatusAwareSink final : public spdlog::sinks::sink {
 public:
  StatusAwareSink(std::shared_ptr<spdlog::sinks::sink> inner, StatusLine& status)
      : inner_(std::move(inner)), status_(status) {}

  void log(const spdlog::details::log_msg& message) override {
    status_.write_above([&] {
      inner_->log(message);
      inner_->flush();
    });
  }
  void flush() override { inner_->flush(); }
  void set_pattern(const std::string& pattern) override { inner_->set_pattern(pattern); }
  void set_formatter(std::unique_ptr<spdlog::formatter> formatter) override {
    inner_->set_formatter(std::move(formatter));
  }

 private:
  std::shared_ptr<spdlog::sinks::sink> inner_;
  StatusLine& status_;
};

}  // namespace

StatusLine& StatusLine::for_stderr() {
  static StatusLine status(stderr, false);
  return status;
}

void StatusLine::set_enabled(bool enabled) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!enabled) erase_locked();
  enabled_ = enabled;
}

bool StatusLine::enabled() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return enabled_;
}

void StatusLine::show(const std::string& text) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!enabled_) return;
  text_ = text;
  draw_locked();
}

void StatusLine::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  erase_locked();
  text_.clear();
}

void StatusLine::write_above(const std::function<void()>& write) {
  std::lock_guard<std::mutex> lock(mutex_);
  erase_locked();
  write();
  if (!text_.empty()) draw_locked();
}

void StatusLine::erase_locked() {
  if (!drawn_) return;
  std::fputs(kEraseLine, stream_);
  std::fflush(stream_);
  drawn_ = false;
}

void StatusLine::draw_locked() {
  if (!enabled_) return;
  const int columns = terminal_columns(stream_);
  // One column short of the width: a line that fills it would wrap on some terminals.
  const size_t width = columns > 1 ? static_cast<size_t>(columns - 1) : text_.size();
  std::fputs(kEraseLine, stream_);
  std::fwrite(text_.data(), 1, std::min(width, text_.size()), stream_);
  std::fflush(stream_);
  drawn_ = true;
}

std::shared_ptr<spdlog::sinks::sink> status_aware_sink(std::shared_ptr<spdlog::sinks::sink> inner, StatusLine& status) {
  return std::make_shared<StatusAwareSink>(std::move(inner), status);
}

bool is_terminal(std::FILE* stream) {
  const int fd = ::fileno(stream);
  return fd >= 0 && ::isatty(fd);
}

int terminal_columns(std::FILE* stream) {
  if (!is_terminal(stream)) return 0;
  winsize size{};
  if (::ioctl(::fileno(stream), TIOCGWINSZ, &size) != 0) return 0;
  return size.ws_col;
}

}  // namespace ptrain::log
