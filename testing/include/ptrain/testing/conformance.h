// The plugin conformance harness (ptrain::testing): checks a plugin against
// the update-step contract (docs/plugins.md, "Testing with the conformance
// harness") on a tiny job its author gives.
//
//   ptrain::testing::ConformanceSpec spec;
//   spec.plugin = "build/libptrain_plugin_orpo.so";
//   spec.config = "tests/conformance.toml";     // a ptrain run config: tiny model, data, [module]
//   spec.zero_unit_examples = {{{"prompt", std::string(100, 'x')}, {"chosen", "a"}, {"rejected", "b"}}};
//   const auto report = ptrain::testing::check_plugin_conformance(spec);
//   REQUIRE(report.passed());                   // report.text() says which check failed and why
//
// First the policy takes steps_before_checks real updates (SGD, lr 1, as the
// world_size_2 run takes them), so that it is no longer the reference model
// a plugin copied at setup: at the first step every log-ratio to such a
// reference is 0, and so is a KL reference point over the batch, which would
// hide a statistic computed per microbatch. The reference is then the
// plugin's own gradient of the next step with its whole global batch as one
// microbatch on one process; every other way of computing the same step must
// reproduce it. The checks (names as in CheckResult::name):
//   split_invariance      microbatch sizes 1, 2, 3 and two token budgets (the
//                         gradient accumulated over microbatches by the core's
//                         update step) give the reference gradient and loss
//   units_before_forward  count_units() gives the same
//                         counts before and after the forward, their sum over
//                         any split is the reference N, and a microbatch with
//                         no units returns a zero loss sum
//   device_and_dtype      every microbatch's loss sums are on the model's
//                         device and float32 or wider, also under
//                         runtime.precision = "bf16-mixed" (run the harness
//                         with that override; on the CPU the default
//                         tolerance holds under bf16-mixed too)
//   metric_reduction      every sum, weighted_mean, max and min metric reduces
//                         to the reference value under every split (`mean`
//                         metrics are per contribution, so split-dependent by
//                         definition, and are not compared)
//   zero_unit_microbatch  a rank with no examples, a global batch of only
//                         zero-unit examples (no units, no gradient, no NaN),
//                         and zero-unit examples mixed into the batch (the
//                         gradient is the reference one)
//   no_scalar_reads       the microbatch loop (microbatches of 2 examples:
//                         each one's microbatch_loss, backward and metric
//                         hand-off) makes no tensor-to-scalar read (item(), a
//                         tensor as a bool or number), which on a GPU would
//                         wait for every microbatch's kernels
//   world_size_2          `ptrain launch --nproc 2 -- train` over Gloo, SGD
//                         with lr 1 and accumulation, the earlier steps and
//                         the checked one: its update equals the reference
//                         gradient, its logged metrics the reference metrics
// Only these headers and the plugin's library are needed: the harness links
// the core's update step itself (libptrain_testing).
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace ptrain::testing {

struct ConformanceSpec {
  // The plugin library under test (libptrain_plugin_<name>.so).
  std::filesystem::path plugin;
  // A ptrain run config for a tiny job: [model] sizes (or init = a model dir),
  // [tokenizer], [data] train and max_length, [batch] global_size (the global
  // batch of step steps_before_checks is the one checked) and the plugin's
  // [module] keys. The harness sets `plugin`, `output_dir` and
  // `train.max_steps` itself.
  std::filesystem::path config;
  // Further "section.key=value" overrides, as `ptrain train --set` takes them.
  std::vector<std::string> overrides;
  // Dataset lines that carry no loss unit for this plugin (e.g. a prompt
  // longer than data.max_length). Empty: only a rank without examples is tried.
  std::vector<nlohmann::json> zero_unit_examples;
  // Scratch directory (removed and recreated); empty: one under the system temp dir.
  std::filesystem::path work_dir;
  // Relative error allowed between gradients, losses and metrics (float32 rounding).
  double tolerance = 1e-5;
  // The world-size-2 check spawns `ptrain launch`; it needs the ptrain this
  // SDK belongs to. Empty: <prefix>/bin/ptrain next to the harness library.
  std::filesystem::path ptrain_executable;
  bool check_world_size_2 = true;
  // Updates (SGD, lr 1, each global batch as one microbatch) before the
  // checked step, so that the policy differs from a reference model copied
  // at setup. 0 checks the first step, where policy and such a reference
  // agree and every log-ratio between them is 0.
  int64_t steps_before_checks = 1;
};

struct CheckResult {
  std::string name;  // split_invariance, units_before_forward, device_and_dtype, metric_reduction,
                     // zero_unit_microbatch, no_scalar_reads, world_size_2
  bool passed = false;
  std::string detail;  // what was compared, and on failure what differed
};

struct ConformanceReport {
  std::vector<CheckResult> checks;

  bool passed() const;
  // The check of that name, or nullptr when it did not run.
  const CheckResult* find(const std::string& name) const;
  // One line per check: "PASS name: detail" / "FAIL name: detail".
  std::string text() const;
};

// Runs every check and reports each; a setup failure (plugin not loadable,
// bad config, dataset error) throws the sdk::Error the launcher would report.
ConformanceReport check_plugin_conformance(const ConformanceSpec& spec);

}  // namespace ptrain::testing
