// The plugin conformance harness (ptrain::testing): checks a plugin against
// the update-step contract (docs/architecture.md#the-update-step,
// docs/architecture.md#metrics, docs/plugins.md) on a tiny job its author gives.
//
//   ptrain::testing::ConformanceSpec spec;
//   spec.plugin = "build/libptrain_plugin_orpo.so";
//   spec.config = "tests/conformance.toml";     // a ptrain run config: tiny model, data, [module]
//   spec.zero_unit_examples = {{{"prompt", std::string(100, 'x')}, {"chosen", "a"}, {"rejected", "b"}}};
//   const auto report = ptrain::testing::check_plugin_conformance(spec);
//   REQUIRE(report.passed());                   // report.text() says which check failed and why
//
// The reference is the plugin's own step-0 gradient with the whole global
// batch as one microbatch on one process; every other way of computing the
// same step must reproduce it. The checks (names as in CheckResult::name):
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
//   world_size_2          `ptrain launch --nproc 2 -- train` over Gloo, one SGD
//                         step with lr 1 and accumulation: the update equals
//                         the reference gradient, the logged metrics the
//                         reference metrics
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
  // [tokenizer], [data] train and max_length, [batch] global_size (the step-0
  // global batch is the one checked) and the plugin's [module] keys. The
  // harness sets `plugin`, `output_dir` and `train.max_steps` itself.
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
