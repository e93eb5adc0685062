// Each rank's log_rank<R>.txt is a record of that rank: its info lines (the
// console shows only rank 0's) and the error that ended it (docs/distributed.md).
#include "catch.h"

#include "integration/small_sft_run.h"
#include "support/run_command.h"

#include <filesystem>
#include <fstream>
#include <string>

namespace fs = std::filesystem;

namespace {

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("every rank's log file holds its info lines and the error that ended it", "[dist][logs]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("rank_logs");
  const fs::path config = ptrain::testing::write_small_sft_config(dir, "run", 1e-3);
  // Rank 1's step 2 is non-finite and one such step aborts the run: every rank fails alike.
  const ptrain::testing::CommandResult result = ptrain::testing::run_command(
      "PTRAIN_TEST_NAN_AT=2:1 " + std::string(PTRAIN_EXE) + " launch --nproc 2 -- train -c " + config.string() +
      " --set train.max_consecutive_skips=1");
  INFO(result.output);
  REQUIRE(result.exit_code == 1);
  const std::string error = "ptrain: error: step 2: 1 consecutive updates had a non-finite loss or gradient norm";
  for (const int rank : {0, 1}) {
    const std::string log = read_text(dir / "run" / ("log_rank" + std::to_string(rank) + ".txt"));
    INFO("log_rank" << rank << ".txt:\n" << log);
    CHECK_THAT(log, Catch::Contains(" r" + std::to_string(rank) + " error " + error));
    CHECK_THAT(log, Catch::Contains(" r" + std::to_string(rank) + " info  [train] plugin sft"));
  }
  // The console still shows rank 0's info lines only.
  CHECK_THAT(result.output, Catch::Contains("[rank 0] "));
  CHECK_THAT(result.output, !Catch::Contains("r1 info"));
}
