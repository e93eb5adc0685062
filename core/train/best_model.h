// best/ and early stopping (checkpoint.best_metric, checkpoint.best_mode,
// train.early_stopping_patience): after each evaluation, a strictly better
// best_metric replaces <output_dir>/best/ with the current policy (written
// by the same function as final/, atomically), and early stopping counts the
// evaluations since the last improvement. Every rank holds the same reduced
// eval metrics, so every rank takes the same decisions. <output_dir>/best.json
// records what best/ holds and the count for people and tools; each
// checkpoint records them as of its step (state()), and a resumed run
// continues from the checkpoint's record, not from best.json, which may
// hold evaluations the stopped run made after that checkpoint.
#pragma once

#include "core/config/run_config.h"
#include "core/dist/communicator.h"
#include "core/train/evaluator.h"
#include "ptrain/sdk/train_module.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

namespace ptrain::train {

// Throws sdk::ConfigError naming checkpoint.best_metric when the plugin's
// evaluation does not give that metric (eval_metric_names()).
void check_best_metric(const config::RunConfig& config, const sdk::TrainModule& module);

class BestModel {
 public:
  // `save_model(dir)` writes the current policy to dir; it runs on every
  // rank (a collective under sharding "full") and writes on rank 0.
  // `resumed`: the record of the checkpoint a resumed run continues
  // (checkpoint::TrainerState::best_model), null for a fresh run. A null
  // record in a resumed run's checkpoint (an older ptrain's) falls back to best.json.
  BestModel(const config::RunConfig& config, dist::Communicator& communicator,
            std::function<void(const std::filesystem::path&)> save_model, const nlohmann::json* resumed);

  // Collective when it saves. After an evaluation at update `step`: keeps
  // best/ when best_metric improved; counts an evaluation without improvement.
  void after_eval(int64_t step, const EvalResult& eval);

  // True once early_stopping_patience evaluations in a row did not improve.
  bool stop_early() const;
  // Why the run stops early, for the run's summary ("" when it does not).
  std::string stop_reason() const;

  // What best/ holds and the early-stopping count, for a checkpoint.
  nlohmann::json state() const;

 private:
  bool improves(double value) const;
  void write_state() const;
  // Continues from `state` (the checkpoint's, or best.json's as `source`)
  // when it is a record of the same metric and mode.
  void restore(const nlohmann::json& state, const std::string& source);

  std::string metric_;  // "": neither best/ nor early stopping
  config::BestMode mode_;
  int64_t patience_;
  std::filesystem::path best_dir_;
  std::filesystem::path state_path_;  // best.json
  dist::Communicator& communicator_;
  std::function<void(const std::filesystem::path&)> save_model_;
  std::optional<double> best_value_;
  int64_t best_step_ = 0;
  int64_t evaluations_without_improvement_ = 0;
};

}  // namespace ptrain::train
