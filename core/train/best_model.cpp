#include "core/train/best_model.h"

#include "core/checkpoint/atomic_dir.h"
#include "core/log/logger.h"
#include "ptrain/sdk/errors.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <sstream>

namespace ptrain::train {
namespace {

std::string format_value(double value) {
  std::ostringstream text;
  text.precision(6);
  text << value;
  return text.str();
}

const char* mode_name(config::BestMode mode) { return mode == config::BestMode::kMin ? "min" : "max"; }

}  // namespace

void check_best_metric(const config::RunConfig& config, const sdk::TrainModule& module) {
  const std::string& metric = config.checkpoint.best_metric;
  if (metric.empty()) return;
  const std::vector<std::string> names = eval_metric_names(module, config.eval);
  if (std::find(names.begin(), names.end(), metric) != names.end()) return;
  std::string listed;
  for (const std::string& name : names) listed += (listed.empty() ? "" : ", ") + name;
  throw sdk::ConfigError(config.source.string() + ": key 'checkpoint.best_metric' = \"" + metric +
                         "\" is not a metric of the plugin's evaluation; it gives " + listed);
}

BestModel::BestModel(const config::RunConfig& config, dist::Communicator& communicator,
                     std::function<void(const std::filesystem::path&)> save_model, const nlohmann::json* resumed)
    : metric_(config.checkpoint.best_metric),
      mode_(config.checkpoint.best_mode),
      patience_(config.train.early_stopping_patience),
      best_dir_(std::filesystem::path(config.output_dir) / "best"),
      state_path_(std::filesystem::path(config.output_dir) / "best.json"),
      communicator_(communicator),
      save_model_(std::move(save_model)) {
  if (resumed == nullptr || metric_.empty()) return;
  if (!resumed->is_null()) {
    restore(*resumed, "the checkpoint");
    return;
  }
  std::ifstream in(state_path_);
  if (!in) return;
  log::warn("checkpoint", "the checkpoint holds no best/ record (an older ptrain's): continuing from " +
                              state_path_.string() + ", which may count evaluations made after the checkpoint");
  restore(nlohmann::json::parse(in, nullptr, false), state_path_.string());
}

nlohmann::json BestModel::state() const {
  return {{"metric", metric_},
          {"mode", mode_name(mode_)},
          {"step", best_step_},
          {"value", best_value_ ? nlohmann::json(*best_value_) : nlohmann::json(nullptr)},
          {"evaluations_without_improvement", evaluations_without_improvement_}};
}

void BestModel::write_state() const { checkpoint::write_file_atomically(state_path_, state().dump(2) + "\n"); }

namespace {

// A record for another metric or mode, or one whose keys have the wrong
// types (a hand-edited best.json), says nothing about this run's best.
// "value" is null until an evaluation improved.
bool is_best_state_of(const nlohmann::json& state, const std::string& metric, const std::string& mode) {
  if (state.is_discarded() || !state.is_object()) return false;
  const auto integer_or_absent = [&](const char* key) {
    return !state.contains(key) || state[key].is_number_integer();
  };
  return state.value("metric", nlohmann::json()) == metric && state.value("mode", nlohmann::json()) == mode &&
         state.contains("value") && (state["value"].is_number() || state["value"].is_null()) &&
         integer_or_absent("step") && integer_or_absent("evaluations_without_improvement");
}

}  // namespace

void BestModel::restore(const nlohmann::json& state, const std::string& source) {
  if (!is_best_state_of(state, metric_, mode_name(mode_))) {
    log::warn("checkpoint", source + " does not describe a best " + metric_ + " (" + mode_name(mode_) +
                                "); the resumed run starts a new best/");
    return;
  }
  evaluations_without_improvement_ = state.value("evaluations_without_improvement", int64_t{0});
  if (!state.contains("value") || !state.at("value").is_number()) return;  // no evaluation yet improved
  best_value_ = state.at("value").get<double>();
  best_step_ = state.value("step", int64_t{0});
  log::info("checkpoint", "resuming with best/ of step " + std::to_string(best_step_) + " (" + metric_ + " = " +
                              format_value(*best_value_) + ")");
}

bool BestModel::improves(double value) const {
  if (!std::isfinite(value)) return false;
  if (!best_value_) return true;
  return mode_ == config::BestMode::kMin ? value < *best_value_ : value > *best_value_;
}

void BestModel::after_eval(int64_t step, const EvalResult& eval) {
  if (metric_.empty() || !eval.ran) return;
  const auto found = eval.metrics.find(metric_);
  if (found == eval.metrics.end()) {
    log::warn("checkpoint", "step " + std::to_string(step) + ": the evaluation gave no " + metric_ +
                                " (nothing to average); counted as no improvement");
  }
  if (found == eval.metrics.end() || !improves(found->second)) {
    ++evaluations_without_improvement_;
    if (communicator_.rank() == 0) write_state();
    return;
  }
  best_value_ = found->second;
  best_step_ = step;
  evaluations_without_improvement_ = 0;
  save_model_(best_dir_);
  if (communicator_.rank() == 0) {
    write_state();
    log::info("checkpoint", best_dir_.string() + " now holds step " + std::to_string(step) + " (" + metric_ + " = " +
                                format_value(found->second) + ")");
  }
  communicator_.barrier();
}

bool BestModel::stop_early() const { return patience_ > 0 && evaluations_without_improvement_ >= patience_; }

std::string BestModel::stop_reason() const {
  if (!stop_early()) return "";
  return "early stopping: " + metric_ + " did not improve in " + std::to_string(evaluations_without_improvement_) +
         " evaluations (train.early_stopping_patience = " + std::to_string(patience_) + "); best " +
         format_value(best_value_.value_or(NAN)) + " at step " + std::to_string(best_step_) + ", kept in " +
         best_dir_.string();
}

}  // namespace ptrain::train
