#include "core/dist/output_relay.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>

namespace ptrain::dist {
namespace {

// Writes complete lines of `chunk` to `out` with the rank prefix; keeps the rest.
void emit_lines(int rank, std::string& partial, const char* chunk, size_t size, FILE* out, bool flush_all) {
  partial.append(chunk, size);
  size_t start = 0;
  for (size_t newline; (newline = partial.find('\n', start)) != std::string::npos; start = newline + 1) {
    std::fprintf(out, "[rank %d] %.*s\n", rank, static_cast<int>(newline - start), partial.data() + start);
  }
  partial.erase(0, start);
  if (flush_all && !partial.empty()) {
    std::fprintf(out, "[rank %d] %s\n", rank, partial.c_str());
    partial.clear();
  }
  std::fflush(out);
}

}  // namespace

OutputRelay::~OutputRelay() {
  for (const Stream& stream : streams_) {
    if (stream.fd >= 0) ::close(stream.fd);
  }
}

void OutputRelay::add(int rank, int fd, FILE* out) { streams_.push_back(Stream{rank, fd, out, {}}); }

bool OutputRelay::has_open_streams() const {
  for (const Stream& stream : streams_) {
    if (stream.fd >= 0) return true;
  }
  return false;
}

void OutputRelay::relay_ready(int timeout_ms) {
  std::vector<pollfd> polls;
  std::vector<Stream*> polled;
  for (Stream& stream : streams_) {
    if (stream.fd < 0) continue;
    polls.push_back({stream.fd, POLLIN, 0});
    polled.push_back(&stream);
  }
  if (polls.empty()) return;
  ::poll(polls.data(), polls.size(), timeout_ms);
  for (size_t i = 0; i < polls.size(); ++i) {
    if ((polls[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0) read_from(*polled[i]);
  }
}

// One read, so one busy worker cannot starve the others' output.
void OutputRelay::read_from(Stream& stream) {
  char buffer[8192];
  const ssize_t count = ::read(stream.fd, buffer, sizeof buffer);
  if (count > 0) {
    emit_lines(stream.rank, stream.partial_line, buffer, static_cast<size_t>(count), stream.out, false);
  } else if (count == 0 || errno != EINTR) {
    emit_lines(stream.rank, stream.partial_line, "", 0, stream.out, true);
    ::close(stream.fd);
    stream.fd = -1;
  }
}

}  // namespace ptrain::dist
