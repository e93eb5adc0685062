// The runner of the test executables, for Catch2 2 and 3 alike: runs the
// tests, then removes the process's scratch folder (support/scratch_dir.h)
// when every test passed. After a failure the folder stays for a look, and
// the runner says where.
#if PTRAIN_CATCH2_MAJOR >= 3
#include <catch2/catch_session.hpp>
#else
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#endif

#include "core/checkpoint/remove_tree.h"
#include "support/scratch_dir.h"

#include <filesystem>
#include <iostream>
#include <system_error>

int main(int argc, char* argv[]) {
  const int failed = Catch::Session().run(argc, argv);
  const std::filesystem::path scratch = ptrain::testing::scratch_root();
  std::error_code error;
  if (!std::filesystem::exists(scratch, error)) return failed;
  if (failed == 0) {
    ptrain::checkpoint::remove_tree(scratch, error);
    if (error) std::cerr << "could not remove the scratch folder " << scratch.string() << ": " << error.message() << "\n";
  } else {
    std::cerr << "a test failed: its scratch files stay in " << scratch.string() << "\n";
  }
  return failed;
}
