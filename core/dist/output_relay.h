// Relays the workers' stdout and stderr to the launcher's own, line by line,
// each line prefixed "[rank N] " so the ranks' output can be told apart.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace ptrain::dist {

class OutputRelay {
 public:
  OutputRelay() = default;
  OutputRelay(const OutputRelay&) = delete;
  OutputRelay& operator=(const OutputRelay&) = delete;
  ~OutputRelay();

  // Takes ownership of `fd`, the read end of rank's stdout or stderr pipe,
  // whose lines go to `out`.
  void add(int rank, int fd, FILE* out);

  // Waits up to timeout_ms for output, then writes the complete lines that
  // arrived. At a stream's end it writes an unterminated last line too and
  // closes the stream.
  void relay_ready(int timeout_ms);

  // Whether some stream has not ended yet.
  bool has_open_streams() const;

 private:
  struct Stream {
    int rank = 0;
    int fd = -1;  // -1 once ended
    FILE* out = nullptr;
    std::string partial_line;
  };
  void read_from(Stream& stream);

  std::vector<Stream> streams_;
};

}  // namespace ptrain::dist
