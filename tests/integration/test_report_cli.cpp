// `ptrain report` on real runs: one self-contained page for several runs, and
// the errors for what is no run (built with -DPTRAIN_REPORT=ON only).
#include "catch.h"

#include "integration/small_sft_run.h"
#include "support/run_command.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>

namespace fs = std::filesystem;

using ptrain::testing::run_ptrain;
using ptrain::testing::write_small_sft_config;

TEST_CASE("ptrain report writes one self-contained page for several runs and refuses what is no run", "[monitoring]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("monitoring_report");
  for (const auto& [name, lr] : {std::pair<const char*, double>{"fast", 3e-3}, {"slow", 1e-3}}) {
    const auto trained = run_ptrain("train -c " + write_small_sft_config(dir, name, lr).string());
    INFO(trained.output);
    REQUIRE(trained.exit_code == 0);
  }
  const auto single = run_ptrain("report " + (dir / "fast").string());
  INFO(single.output);
  REQUIRE(single.exit_code == 0);
  CHECK(fs::exists(dir / "fast" / "report.html"));

  const fs::path page = dir / "compare.html";
  const auto both =
      run_ptrain("report " + (dir / "fast").string() + " " + (dir / "slow").string() + " -o " + page.string());
  INFO(both.output);
  REQUIRE(both.exit_code == 0);
  CHECK_THAT(both.output, Catch::Contains("2 runs"));
  std::ifstream in(page);
  const std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK_THAT(html, Catch::Contains("<td>fast</td>") && Catch::Contains("<td>slow</td>"));
  CHECK_THAT(html, Catch::Contains("github.com/danvk/dygraphs"));  // the library itself (its licence line), inlined
  CHECK_THAT(html, !Catch::Contains("<script src") && !Catch::Contains("<link"));

  const auto missing = run_ptrain("report " + (dir / "nothing_here").string());
  CHECK(missing.exit_code == 1);
  CHECK_THAT(missing.output, Catch::Contains("nothing_here/metrics.jsonl: cannot read"));
  const auto no_dir = run_ptrain("report");
  CHECK(no_dir.exit_code == 2);
  CHECK_THAT(no_dir.output, Catch::Contains("needs a run directory"));
}

TEST_CASE("ptrain report shows a run's sample completions at its first, middle and last evaluation",
          "[monitoring][generate]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("report_samples");
  const fs::path config = write_small_sft_config(dir, "run", 3e-3, 40);
  std::ofstream(config, std::ios::app) << "[eval]\ndata = \"" << PTRAIN_SOURCE_DIR << "/data/arith/test.jsonl\"\n"
                                       << "every_steps = 10\nmax_examples = 8\nrewards = [\"accuracy\", \"closeness\"]\n"
                                       << "max_new_tokens = 4\n";
  const auto trained = run_ptrain("train -c " + config.string());
  INFO(trained.output);
  REQUIRE(trained.exit_code == 0);
  const auto reported = run_ptrain("report " + (dir / "run").string());
  INFO(reported.output);
  REQUIRE(reported.exit_code == 0);
  std::ifstream in(dir / "run" / "report.html");
  const std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK_THAT(html, Catch::Contains("sample completions (eval_samples.jsonl)"));
  // Evaluations after steps 10, 20, 30 and 40: the first, the middle (30) and the last are shown, 4 prompts each.
  for (const char* step : {"10", "30", "40"}) {
    CHECK_THAT(html, Catch::Contains(std::string("<tr><td>") + step + "</td><td><code>7+11=</code>"));
  }
  CHECK_THAT(html, !Catch::Contains("<tr><td>20</td>"));
  CHECK_THAT(html, Catch::Contains("accuracy 0, closeness"));
  CHECK_THAT(html, Catch::Contains("eval/accuracy"));  // the reward's curve is charted with the rest
}
