// A finished or running run as `ptrain report` reads it from its directory:
// metrics.jsonl (one object per step) and the resolved config.toml.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ptrain::report {

struct RunData {
  std::string name;  // the directory's name, made unique among the runs of one report
  std::filesystem::path dir;
  std::string config_toml;     // "" when the run has no config.toml
  std::vector<int64_t> steps;  // in file order
  // Per metric, one entry per step: nullopt where the line lacks the metric
  // or holds null (a non-finite value).
  std::map<std::string, std::vector<std::optional<double>>> metrics;
  // eval_samples.jsonl's lines (train/eval_samples.h): {"step", "samples"},
  // one per evaluation by generation; empty without the file.
  std::vector<nlohmann::json> eval_samples;
};

// Throws sdk::Error when dir has no metrics.jsonl, sdk::DataError naming
// file:line for a line of it, or of eval_samples.jsonl, that is not a JSON
// object with an integer "step". A malformed last line (a crash mid-write)
// is skipped.
RunData read_run(const std::filesystem::path& dir);

// The metrics whose value is the same at every step that logs them, in
// every run, over at least two steps (comm_s, loss_spikes, nonfinite_steps
// of a healthy one-process run): each is a line of the report's summary, not
// a chart. Name → that value.
std::map<std::string, double> constant_metrics(const std::vector<RunData>& runs);

// Metric families, one chart each, of the metrics that are not constant: the
// part of a name before its first '/' ("rewards/format" → "rewards"), or the
// whole name; an evaluation's metric joins its training counterpart's
// family ("eval/loss" → "loss", "eval/rewards/accuracy" → "rewards") and
// follows it there. The core's headline metrics come first (loss, lr,
// tokens_per_s, grad_norm), then the rest by name.
std::vector<std::pair<std::string, std::vector<std::string>>> metric_families(const std::vector<RunData>& runs);

}  // namespace ptrain::report
