// What the bad-input suite asserts of every case: the input is rejected with
// the error kind of sdk/errors.h that main() maps to an exit code, and the
// message names where the problem is (file:line, key, tensor or path).
#pragma once

#include <functional>
#include <string>

namespace ptrain::testing {

struct Rejection {
  std::string kind;  // "ConfigError", "DataError", ..., "accepted", or "unexpected <type>"
  std::string message;
};

Rejection rejection_of(const std::function<void()>& action);

// Checks (Catch CHECKs) that `action` throws `kind` with `location` in its message.
void check_rejected(const std::function<void()>& action, const std::string& kind, const std::string& location);

}  // namespace ptrain::testing
