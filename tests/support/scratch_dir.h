// Where a test process keeps its scratch files: one folder per process under
// the system's temp directory. The test runner (tests/catch_main.cpp) removes
// it when every test of the process passed and keeps it, saying where, when
// one failed. Header-only: the conformance tests link no test support library.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

namespace ptrain::testing {

inline std::filesystem::path scratch_root() {
  return std::filesystem::temp_directory_path() / ("ptrain_test_" + std::to_string(::getpid()));
}

}  // namespace ptrain::testing
