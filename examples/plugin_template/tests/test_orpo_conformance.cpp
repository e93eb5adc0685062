// The built plugin against ptrain's update-step contract (split invariance,
// units, metric reduction, zero-unit microbatches, two ranks over Gloo).
#include "catch_config.h"

#include "ptrain/testing/conformance.h"

#include <iostream>

TEST_CASE("the ORPO plugin passes ptrain's conformance harness", "[orpo][conformance]") {
  ptrain::testing::ConformanceSpec spec;
  spec.plugin = ORPO_PLUGIN;
  spec.config = ORPO_TEST_DIR "/conformance.toml";
  spec.overrides = {"data.train=\"" ORPO_TEST_DIR "/prefs_small.jsonl\""};
  spec.work_dir = ORPO_WORK_DIR;
  // Every pair keeps at least one answer token, so an ORPO example always
  // has its unit; the harness still runs a rank with no examples.
  const ptrain::testing::ConformanceReport report = ptrain::testing::check_plugin_conformance(spec);
  // What each check compared, also when everything passes.
  std::cout << report.text();
  CHECK(report.passed());
  CHECK(report.find("world_size_2") != nullptr);
}
