// Evaluation by generation during training (eval.rewards,
// docs/evaluation.md#evaluation-by-generation): each held-out prompt's
// completions, sampled from the current policy by ptrain's decoder, scored
// by reward functions and logged as eval/<reward> means, beside the plugin's
// eval/loss and usable as checkpoint.best_metric.
//
// The completions are those `ptrain eval` gives for the same model and
// settings (core/generation/completions.h): prompt i on rank i mod R, its
// draws seeded by (seed, i, k), so they and the means do not depend on the
// world size. A sharded policy (sharding "full") is held whole while it
// generates, as GRPO's generation_gather = "whole" holds it.
#pragma once

#include "core/config/run_config.h"
#include "core/dist/communicator.h"
#include "core/generation/completion_rewards.h"
#include "core/generation/completions.h"
#include "core/model/causal_lm.h"
#include "ptrain/sdk/batch.h"
#include "ptrain/sdk/tokenizer.h"

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

namespace ptrain::train {

// eval/<reward> for each entry of eval.rewards.
std::vector<std::string> generation_eval_metric_names(const config::EvalSection& eval);

class GenerationEval {
 public:
  // Takes the held-out examples' prompts (generation::held_out_prompts: an
  // SFT chat example's answer is its last message), checks each as
  // generation and the rewards will read it, and opens the rewards:
  // sdk::DataError naming file:line, or sdk::ConfigError naming the config
  // file and key.
  GenerationEval(const config::RunConfig& config, model::CausalLm& policy, const sdk::Tokenizer& tokenizer,
                 const std::vector<sdk::Example>& examples);

  struct Result {
    std::map<std::string, double> metrics;  // eval/<reward>
    nlohmann::json samples;                 // the first prompts' first completions, scored (eval_samples.h)
  };
  // Collective. The policy as it is now.
  Result evaluate(dist::Communicator& communicator);

 private:
  model::CausalLm& policy_;
  const sdk::Tokenizer& tokenizer_;
  std::vector<sdk::Example> prompts_;
  generation::GenerationSettings settings_;
  std::vector<generation::NamedReward> rewards_;
};

}  // namespace ptrain::train
