// A ptrain configured with -DPTRAIN_TENSORBOARD=OFF (built only then): a run
// that asks for event files stops before its first step with a config error
// that names the key and the build option.
#include "catch.h"

#include "integration/small_sft_run.h"
#include "support/run_command.h"

#include <filesystem>

namespace fs = std::filesystem;
using ptrain::testing::run_ptrain;

TEST_CASE("without TensorBoard in the build, logging.tensorboard = true is a config error naming the option",
          "[optional_outputs]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("without_tensorboard");
  const fs::path config = ptrain::testing::write_small_sft_config(dir, "run", 3e-3);
  const auto result = run_ptrain("train -c " + config.string() + " --set logging.tensorboard=true");
  INFO(result.output);
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.output, Catch::Contains("ptrain: config error: logging.tensorboard = true") &&
                                Catch::Contains("-DPTRAIN_TENSORBOARD=OFF"));
  CHECK_THAT(result.output, !Catch::Contains("step 1/12"));
  const fs::path metrics = dir / "run" / "metrics.jsonl";
  CHECK((!fs::exists(metrics) || fs::file_size(metrics) == 0));

  const auto without = run_ptrain("train -c " + config.string() + " --set train.max_steps=1 --overwrite");
  INFO(without.output);
  CHECK(without.exit_code == 0);
}
