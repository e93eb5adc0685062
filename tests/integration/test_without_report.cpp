// A ptrain configured with -DPTRAIN_REPORT=OFF (built only then): `ptrain
// report` says in one line that this build has no HTML report.
#include "catch.h"

#include "support/run_command.h"

TEST_CASE("without the HTML report in the build, ptrain report says so", "[optional_outputs]") {
  const auto dir = ptrain::testing::fresh_test_dir("without_report");
  const auto result = ptrain::testing::run_ptrain("report " + dir.string());
  INFO(result.output);
  CHECK(result.exit_code == 1);
  CHECK(result.output == "ptrain: error: this ptrain was built without the HTML report (-DPTRAIN_REPORT=OFF)\n");
}
