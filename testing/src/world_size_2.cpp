#include "world_size_2.h"

#include "check_support.h"

#include "core/model/causal_lm.h"
#include "core/model/lora_adapter_dir.h"

#include <ATen/ATen.h>

#include <nlohmann/json.hpp>

#include <dlfcn.h>

#include <cmath>
#include <cstdlib>
#include <fstream>

namespace ptrain::testing {
namespace fs = std::filesystem;

namespace {

// `text` quoted for /bin/sh.
std::string shell_quoted(const std::string& text) {
  std::string quoted = "'";
  for (const char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// <prefix>/bin/ptrain for the prefix this library sits in (<prefix>/lib), in
// an install as in a build tree.
fs::path default_ptrain_executable() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<const void*>(&check_plugin_conformance), &info) == 0 || info.dli_fname == nullptr) {
    return "ptrain";
  }
  return fs::absolute(info.dli_fname).parent_path().parent_path() / "bin" / "ptrain";
}

std::string last_lines(const fs::path& file, size_t count) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::string tail;
  for (size_t i = lines.size() > count ? lines.size() - count : 0; i < lines.size(); ++i) tail += "\n  " + lines[i];
  return tail;
}

// `ptrain launch --nproc 2 -- train` of the spec's config, to the checked
// step with SGD at lr 1 (each update is the gradient); "" when it ran, else
// what failed with the end of its log.
std::string launch_two_ranks(const TwoRankCheck& input, int64_t checked_step) {
  std::vector<std::string> overrides = input.spec.overrides;
  overrides.insert(overrides.end(),
                   {"plugin=" + toml_string(input.plugin_path.string()),
                    "output_dir=" + toml_string(input.output_dir.string()), "optim.name=\"sgd\"", "optim.lr=1.0",
                    "optim.weight_decay=0.0", "optim.momentum=0.0", "optim.clip_grad_norm=0.0",
                    "schedule.name=\"constant\"", "schedule.warmup_steps=0",
                    "train.max_steps=" + std::to_string(checked_step), "checkpoint.every_steps=0",
                    "distributed.timeout_s=120"});
  // Accumulation on each rank too, when the config splits by examples.
  if (!input.split_by_tokens) overrides.push_back("batch.micro_size=1");
  const fs::path ptrain =
      input.spec.ptrain_executable.empty() ? default_ptrain_executable() : input.spec.ptrain_executable;
  std::string command = shell_quoted(ptrain.string()) + " launch --nproc 2 -- train -c " +
                        shell_quoted(fs::absolute(input.spec.config).string());
  for (const std::string& override_text : overrides) command += " --set " + shell_quoted(override_text);
  const fs::path log = input.output_dir.parent_path() / "world_size_2.log";
  const int status = std::system((command + " > " + shell_quoted(log.string()) + " 2>&1").c_str());
  if (status == 0) return "";
  return "`ptrain launch --nproc 2 -- train` failed (status " + std::to_string(status) + "), log " + log.string() +
         ":" + last_lines(log, 8);
}

// The last update of the two-rank run: initial weights minus final/'s (the
// weights, or with [lora] the adapters, whose PEFT directory final/ is then).
std::vector<at::Tensor> two_rank_update(const TwoRankCheck& input) {
  const fs::path final_dir = input.output_dir / "final";
  const auto trained = model::is_lora_adapter_dir(final_dir)
                           ? model::read_lora_adapter_dir(final_dir).weights
                           : model::CausalLm::load_hf_dir(final_dir)->named_parameters();
  std::vector<at::Tensor> update;
  for (size_t i = 0; i < trained.size(); ++i) {
    // The in-process run's weights are on its device; the files load on the host.
    update.push_back(input.initial_parameters.at(i).to(at::kCPU) - trained[i].second.detach());
  }
  return update;
}

// metrics.jsonl's numbers at `step` (1-based), with the loss as core/loss.
std::map<std::string, double> logged_metrics(const fs::path& output_dir, int64_t step) {
  std::ifstream metrics_file(output_dir / "metrics.jsonl");
  std::string line;
  for (int64_t read = 0; read < step; ++read) std::getline(metrics_file, line);
  const nlohmann::json checked = nlohmann::json::parse(line);
  std::map<std::string, double> logged;
  for (const auto& [name, value] : checked.items()) {
    if (value.is_number()) logged[name] = value.get<double>();
  }
  logged["core/loss"] = logged.count("loss") ? logged["loss"] : std::nan("");
  return logged;
}

}  // namespace

CheckResult check_world_size_2(const TwoRankCheck& input) {
  CheckResult check{"world_size_2", true, ""};
  const int64_t checked_step = input.steps_before + 1;  // 1-based, as metrics.jsonl counts
  const std::string failed = launch_two_ranks(input, checked_step);
  if (!failed.empty()) {
    check.passed = false;
    check.detail = failed;
    return check;
  }
  const double error = relative_error(two_rank_update(input), input.reference.gradients);
  // The update is recovered as a difference of weights: float32 rounding of
  // the weights, not of the gradient, bounds its precision.
  const double tolerance = std::max(input.spec.tolerance, 1e-4);
  if (!(error <= tolerance)) {
    check.passed = false;
    check.detail += " the update differs from the reference gradient (relative error " + format_number(error) + ");";
  }
  std::vector<sdk::MetricSpec> specs = input.metric_specs;
  specs.push_back({"core/loss", sdk::Reduction::kSum});
  const std::string differences =
      metric_differences(logged_metrics(input.output_dir, checked_step), input.reference.metrics, specs, tolerance);
  if (!differences.empty()) {
    check.passed = false;
    check.detail += " logged metrics differ:" + differences;
  }
  return finished(check,
                  "2 ranks over Gloo with accumulation, " + std::to_string(checked_step) +
                      " steps: the last update = reference gradient (relative error " + format_number(error) +
                      "), loss and metrics as in the single-process step",
                  "the two-rank run disagrees with the single-process step:");
}

}  // namespace ptrain::testing
