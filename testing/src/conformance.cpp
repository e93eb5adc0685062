// The conformance checks (ptrain/testing/conformance.h): one reference step
// and its variants through the core's own update step, plus one real
// two-rank run through `ptrain launch` (world_size_2.cpp).
#include "ptrain/testing/conformance.h"

#include "check_support.h"
#include "in_process_run.h"
#include "world_size_2.h"

#include "core/checkpoint/owned_removal.h"
#include "core/config/config_loader.h"
#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>

#include <unistd.h>

#include <fstream>

namespace ptrain::testing {
namespace fs = std::filesystem;

bool ConformanceReport::passed() const {
  for (const CheckResult& check : checks) {
    if (!check.passed) return false;
  }
  return !checks.empty();
}

const CheckResult* ConformanceReport::find(const std::string& name) const {
  for (const CheckResult& check : checks) {
    if (check.name == name) return &check;
  }
  return nullptr;
}

std::string ConformanceReport::text() const {
  std::string text;
  for (const CheckResult& check : checks) {
    text += std::string(check.passed ? "PASS " : "FAIL ") + check.name + ": " + check.detail + "\n";
  }
  return text;
}

namespace {

struct Split {
  std::string name;
  sdk::MicrobatchPlan plan;
};

// Accumulation over microbatches of 1, 2 and 3 examples (3 leaves an uneven
// last one) and two token budgets.
std::vector<Split> variant_splits(int64_t max_length) {
  return {{"micro_size=1", {1, 0}},
          {"micro_size=2", {2, 0}},
          {"micro_size=3", {3, 0}},
          {"micro_tokens=" + std::to_string(max_length), {0, max_length}},
          {"micro_tokens=" + std::to_string(3 * max_length), {0, 3 * max_length}}};
}

class Harness {
 public:
  explicit Harness(const ConformanceSpec& spec) : spec_(spec), plugin_(plugin::load_plugin_file(spec.plugin)) {
    work_dir_ = spec.work_dir.empty() ? fs::temp_directory_path() / ("ptrain_conformance_" + std::to_string(::getpid()))
                                      : spec.work_dir;
    checkpoint::remove_owned(work_dir_);  // never "/", the home or working directory or a parent
    fs::create_directories(work_dir_);
    plugin_path_ = fs::absolute(spec.plugin).lexically_normal();
  }

  ConformanceReport run() {
    if (spec_.steps_before_checks < 0) {
      throw sdk::UsageError("conformance: steps_before_checks is " + std::to_string(spec_.steps_before_checks) +
                            "; give 0 or more");
    }
    InProcessRun run(plugin_, resolve({"output_dir=" + toml_string((work_dir_ / "in_process").string())}));
    // The policy trains away from where it started (and from a reference
    // copied then), so that log-ratios and batch statistics are not all 0.
    for (int64_t step = 0; step < spec_.steps_before_checks; ++step) earlier_steps_.push_back(run.step_batch(step));
    run.take_steps(earlier_steps_);
    const StepBatch checked = run.step_batch(spec_.steps_before_checks);
    run.set_step(checked.step, checked.epoch);
    global_batch_ = checked.indices;
    specs_ = run.metric_specs();
    initial_parameters_ = run.parameter_values();
    reference_ = run.step(global_batch_, {static_cast<int64_t>(global_batch_.size()), 0});
    if (!reference_.result.has_units) {
      throw sdk::UsageError("conformance: the global batch of step " + std::to_string(checked.step) + " of " +
                            spec_.config.string() + " has no loss unit; give data with something to learn from");
    }
    ConformanceReport report;
    // The split variants of the step, shared by the gradient and metric checks.
    std::vector<std::pair<Split, StepOutcome>> variants;
    for (const Split& split : variant_splits(run.config().data.max_length)) {
      variants.emplace_back(split, run.step(global_batch_, split.plan));
    }
    report.checks.push_back(check_splits(variants));
    report.checks.push_back(check_units(run));
    report.checks.push_back(check_placement(run));
    report.checks.push_back(check_metrics(variants));
    report.checks.push_back(check_zero_units(run));
    report.checks.push_back(check_scalar_reads(run));
    if (spec_.check_world_size_2) report.checks.push_back(check_world_size_2());
    return report;
  }

 private:
  config::RunConfig resolve(std::vector<std::string> overrides) const {
    std::vector<std::string> all = spec_.overrides;
    // The harness looks at one step after the earlier ones; a config written only for it need not say so.
    all.push_back("train.max_steps=" + std::to_string(spec_.steps_before_checks + 1));
    all.push_back("plugin=" + toml_string(plugin_path_.string()));
    all.insert(all.end(), overrides.begin(), overrides.end());
    return config::load_run_config(spec_.config, all, plugin_.config_schema());
  }

  CheckResult check_splits(const std::vector<std::pair<Split, StepOutcome>>& variants) {
    CheckResult check{"split_invariance", true, ""};
    double worst = 0.0;
    for (const auto& [split, outcome] : variants) {
      const double error = relative_error(outcome.gradients, reference_.gradients);
      worst = std::max(worst, error);
      const double loss = outcome.metrics.at("core/loss"), want = reference_.metrics.at("core/loss");
      if (!(error <= spec_.tolerance)) {
        check.passed = false;
        check.detail += " " + split.name + ": relative gradient error " + format_number(error) + ";";
      }
      if (!close(loss, want, spec_.tolerance)) {
        check.passed = false;
        check.detail += " " + split.name + ": loss " + format_number(loss) + " vs " + format_number(want) + ";";
      }
    }
    return finished(check,
                    "gradient and loss of " + std::to_string(global_batch_.size()) +
                        " examples equal the single-microbatch step under 5 splits (worst relative gradient error " +
                        format_number(worst) + ")",
                    "the step differs from the single-microbatch step (a loss normalised per microbatch, or a "
                    "statistic of the batch — a mean, a KL reference point, a baseline — computed per microbatch "
                    "instead of over ctx.global_batch()?):");
  }

  CheckResult check_units(InProcessRun& run) {
    CheckResult check{"units_before_forward", true, ""};
    const std::vector<int64_t>& reference_units = reference_.result.global_units;
    for (const Split& split : variant_splits(run.config().data.max_length)) {
      std::vector<int64_t> total(reference_units.size(), 0);
      const std::vector<MicrobatchUnits> audits = run.audit_units(global_batch_, split.plan);
      for (size_t k = 0; k < audits.size(); ++k) {
        const MicrobatchUnits& audit = audits[k];
        const std::string where = " " + split.name + ", microbatch " + std::to_string(k) + ":";
        if (audit.loss_sums.size() != audit.before_forward.size()) {
          check.passed = false;
          check.detail += where + " " + std::to_string(audit.loss_sums.size()) + " loss sums for " +
                          std::to_string(audit.before_forward.size()) + " unit counts;";
          continue;
        }
        if (audit.before_forward != audit.after_forward) {
          check.passed = false;
          check.detail += where + " count_units changed after the forward;";
        }
        for (size_t term = 0; term < audit.before_forward.size() && term < total.size(); ++term) {
          total[term] += audit.before_forward[term];
          if (audit.before_forward[term] == 0 && audit.loss_sums.at(term) != 0.0) {
            check.passed = false;
            check.detail += where + " term " + std::to_string(term) + " has no units but a loss sum of " +
                            format_number(audit.loss_sums[term]) + ";";
          }
        }
      }
      if (total != reference_units) {
        check.passed = false;
        check.detail += " " + split.name + ": units sum to " + std::to_string(total.at(0)) + " instead of " +
                        std::to_string(reference_units.at(0)) + " (the count depends on the split);";
      }
    }
    return finished(check,
                    "counts are fixed before the forward, add up to N = " + std::to_string(reference_units[0]) +
                        " under every split, and zero-unit microbatches add a zero loss sum",
                    "unit counts disagree with what the loss used:");
  }

  CheckResult check_placement(InProcessRun& run) {
    CheckResult check{"device_and_dtype", true, ""};
    const std::vector<MicrobatchUnits> audits = run.audit_units(global_batch_, {2, 0});
    for (size_t k = 0; k < audits.size(); ++k) {
      if (audits[k].placement_problems.empty()) continue;
      check.passed = false;
      check.detail += " microbatch " + std::to_string(k) + ":" + audits[k].placement_problems;
    }
    const config::RunConfig& config = run.config();
    return finished(check,
                    "the loss sums of " + std::to_string(audits.size()) +
                        " microbatches are float32 or wider, on the model's device (runtime.precision = " +
                        (config.runtime.precision == config::Precision::kBf16Mixed ? "bf16-mixed" : "fp32") + ")",
                    "loss sums left the model's device or its float32 accumulation:");
  }

  CheckResult check_metrics(const std::vector<std::pair<Split, StepOutcome>>& variants) {
    CheckResult check{"metric_reduction", true, ""};
    size_t compared = 0;
    for (const sdk::MetricSpec& spec : specs_) compared += spec.reduction == sdk::Reduction::kMean ? 0 : 1;
    for (const auto& [split, outcome] : variants) {
      const std::string differences = metric_differences(outcome.metrics, reference_.metrics, specs_, spec_.tolerance);
      if (!differences.empty()) {
        check.passed = false;
        check.detail += " " + split.name + ":" + differences;
      }
    }
    return finished(check,
                    std::to_string(compared) +
                        " sum/weighted_mean/max/min metrics reduce to the single-microbatch values under every split",
                    "metrics differ from the single-microbatch step (weight a per-microbatch mean by its units; a "
                    "statistic of the batch computed per microbatch shows here too):");
  }

  CheckResult check_zero_units(InProcessRun& run) {
    CheckResult check{"zero_unit_microbatch", true, ""};
    const StepOutcome empty_rank = run.step({}, {1, 0});
    if (empty_rank.result.has_units || !all_finite(empty_rank.metrics)) {
      check.passed = false;
      check.detail += " a rank without examples reported units or non-finite metrics;";
    }
    if (!spec_.zero_unit_examples.empty()) check_zero_unit_examples(run, check);
    return finished(check,
                    spec_.zero_unit_examples.empty()
                        ? "a rank without examples adds no unit (give zero_unit_examples to check more)"
                        : "a rank without examples, a batch of " + std::to_string(spec_.zero_unit_examples.size()) +
                              " zero-unit examples (no units, zero gradient, finite metrics) and the same mixed "
                              "into the batch (gradient unchanged) are handled",
                    "zero-unit input is mishandled:");
  }

  // The same dataset with the zero-unit examples appended, so that every
  // original example keeps its index.
  void check_zero_unit_examples(InProcessRun& run, CheckResult& check) {
    const fs::path data = work_dir_ / "with_zero_units.jsonl";
    {
      std::ofstream out(data);
      for (const sdk::Example& example : run.examples()) out << example.fields.dump() << "\n";
      for (const nlohmann::json& example : spec_.zero_unit_examples) out << example.dump() << "\n";
    }
    InProcessRun extended(plugin_, resolve({"output_dir=" + toml_string((work_dir_ / "zero_units").string()),
                                            "data.train=" + toml_string(data.string())}));
    // The same earlier steps (the original examples keep their indices), so that it starts where `run` does.
    extended.take_steps(earlier_steps_);
    const StepBatch checked = run.step_batch(spec_.steps_before_checks);
    extended.set_step(checked.step, checked.epoch);
    std::vector<int64_t> zero_indices;
    for (size_t i = 0; i < spec_.zero_unit_examples.size(); ++i) {
      zero_indices.push_back(static_cast<int64_t>(run.examples().size() + i));
    }
    const StepOutcome only_zero = extended.step(zero_indices, {1, 0});
    double gradient_norm = 0.0;
    for (const at::Tensor& gradient : only_zero.gradients) gradient_norm += gradient.abs().sum().item<double>();
    if (only_zero.result.has_units || gradient_norm != 0.0 || !all_finite(only_zero.metrics)) {
      check.passed = false;
      check.detail += " a batch of only zero-unit examples gave " + units_text(only_zero.result.global_units) +
                      " units, gradient L1 norm " + format_number(gradient_norm) +
                      (all_finite(only_zero.metrics) ? "" : ", non-finite metrics") + ";";
    }
    // Against the same split without them, so that only their effect shows.
    std::vector<int64_t> mixed = zero_indices;
    mixed.insert(mixed.end(), global_batch_.begin(), global_batch_.end());
    const StepOutcome with_zero = extended.step(mixed, {1, 0});
    const StepOutcome without_zero = run.step(global_batch_, {1, 0});
    const double error = relative_error(with_zero.gradients, without_zero.gradients);
    if (!(error <= spec_.tolerance) || with_zero.result.global_units != reference_.result.global_units) {
      check.passed = false;
      check.detail += " zero-unit examples mixed into the batch changed the gradient (relative error " +
                      format_number(error) + ") or the units (" + units_text(with_zero.result.global_units) + " vs " +
                      units_text(reference_.result.global_units) + ");";
    }
  }

  CheckResult check_scalar_reads(InProcessRun& run) {
    CheckResult check{"no_scalar_reads", true, ""};
    const LoopReads loop = run.loop_scalar_reads(global_batch_, {2, 0});
    if (loop.reads > 0) {
      check.passed = false;
      check.detail += " " + std::to_string(loop.reads) + " reads in a loop of " + std::to_string(loop.microbatches) +
                      " microbatches;";
    }
    return finished(check,
                    "the microbatch loop (" + std::to_string(loop.microbatches) +
                        " microbatches of 2 examples) reads no tensor back to the host",
                    "microbatch_loss reads tensors back to the host (item(), a tensor as a bool or a number), a "
                    "device sync per microbatch on a GPU; add metric values as tensors (MetricList::add) and count "
                    "units in prepare():");
  }

  CheckResult check_world_size_2() {
    const fs::path output_dir = work_dir_ / "world_size_2";
    const config::RunConfig config = resolve({"output_dir=" + toml_string(output_dir.string())});
    return testing::check_world_size_2({spec_, plugin_path_, output_dir, config.batch.micro_tokens > 0,
                                        initial_parameters_, reference_, specs_, spec_.steps_before_checks});
  }

  const ConformanceSpec& spec_;
  plugin::LoadedPlugin plugin_;
  fs::path work_dir_;
  fs::path plugin_path_;
  std::vector<StepBatch> earlier_steps_;        // the updates taken before the checked step
  std::vector<at::Tensor> initial_parameters_;  // the weights of the checked step (its variants leave them)
  std::vector<int64_t> global_batch_;           // the checked step's
  std::vector<sdk::MetricSpec> specs_;
  StepOutcome reference_;
};

}  // namespace

ConformanceReport check_plugin_conformance(const ConformanceSpec& spec) { return Harness(spec).run(); }

}  // namespace ptrain::testing
