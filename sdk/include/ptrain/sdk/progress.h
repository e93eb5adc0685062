// Progress of a plugin's long set-up or per-step phase (tokenizing,
// precomputing reference log-probs, generating rollouts). The host shows it
// as a bar on a terminal and as periodic log lines otherwise, on rank 0.
#pragma once

#include <cstdint>

namespace ptrain::sdk {

class Progress {
 public:
  virtual ~Progress() = default;
  // `count` more items of the phase's total are done (on this rank).
  virtual void advance(int64_t count = 1) = 0;
  // The phase is complete: the host logs how long it took. Destroying a
  // Progress without finish() (an exception) removes the bar silently.
  virtual void finish() = 0;
};

// What a host without a display hands out (and test contexts get by default).
class NoProgress final : public Progress {
 public:
  void advance(int64_t) override {}
  void finish() override {}
};

}  // namespace ptrain::sdk
