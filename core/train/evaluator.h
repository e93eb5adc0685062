// Evaluation on the held-out set of [eval] during training. The evaluator
// owns its cadence (docs/style.md#set-up-is-not-the-loop): after every eval.every_steps-th update and
// always after the last one.
//
// An evaluation runs the plugin's microbatch loss without gradients over the
// whole held-out set, split over the ranks (example i on rank i mod R, so
// shards may be uneven) and, on each rank, into microbatches by the run's
// batch plan. As for an update step (docs/architecture.md#the-update-step) each loss term j adds
// its sums S_j and units n_j, and
//   eval/loss = Σ_j ΣS_j / divisor_j(N_j)     (a term with N_j = 0 adds nothing)
// over the whole set, with the sums and the plugin's metrics reduced by the
// same metrics::MetricReducer as a step's, so every figure is the same for
// any world size and microbatch split. Metrics are named eval/<metric>.
// With eval.rewards it then generates and scores (generation_eval.h).
#pragma once

#include "core/dist/communicator.h"
#include "core/config/run_config.h"
#include "core/plugin/host_context.h"
#include "core/train/generation_eval.h"
#include "ptrain/sdk/batch.h"
#include "ptrain/sdk/train_module.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ptrain::train {

// What an evaluation adds to the step's record.
struct EvalResult {
  bool ran = false;
  std::map<std::string, double> metrics;  // eval/loss, eval/<term losses>, eval/<plugin metric>, eval/<reward>
  nlohmann::json samples = nlohmann::json::array();  // with eval.rewards: scored completions (eval_samples.h)
  double seconds = 0.0;
};

// Every metric an evaluation of `module` may report: eval/loss,
// eval/loss/<term> with several loss terms, eval/<metric> for each of the
// plugin's metric specs, and eval/<reward> for each of eval.rewards.
std::vector<std::string> eval_metric_names(const sdk::TrainModule& module, const config::EvalSection& eval);

struct EvalParts {
  sdk::TrainModule& module;
  std::string plugin_name;       // named in errors about its loss terms
  plugin::HostContext& context;  // its global_batch() is each chunk while the plugin prepares it
  dist::Communicator& communicator;
  const std::vector<sdk::Example>& examples;  // the held-out set; empty: no evaluation
  sdk::MicrobatchPlan plan;
  int64_t chunk_size = 1;  // examples prepared at once over all ranks (batch.global_size)
  GenerationEval* generation = nullptr;  // with eval.rewards: eval/<reward> by generation
};

class Evaluator {
 public:
  Evaluator(EvalParts parts, int64_t every_steps);

  // Collective. After update `completed_steps` (1-based): evaluates when
  // the cadence says so or `last_step`; otherwise returns {ran = false}.
  EvalResult after_step(int64_t completed_steps, bool last_step);

  // Collective. One evaluation of the current policy.
  EvalResult evaluate();

 private:
  EvalParts parts_;
  int64_t every_steps_;
};

}  // namespace ptrain::train
