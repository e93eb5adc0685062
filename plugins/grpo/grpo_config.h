// [module] settings of the GRPO plugin, read once into a typed struct.
// docs/grpo.md gives each option's formula and paper.
#pragma once

#include "ptrain/sdk/config_schema.h"
#include "ptrain/sdk/generation.h"
#include "ptrain/sdk/util/aggregation.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ptrain::grpo {

enum class ScaleRewards { kGroup, kBatch, kNone };
enum class RewardAggregation { kSumThenNormalize, kNormalizeThenSum };
enum class ImportanceSampling { kToken, kSequence };
enum class KlEstimator { kK1, kK2, kK3 };
// The per-token surrogate (grpo_loss.h): PPO's clip, CISPO or SAPO.
enum class PolicyLoss { kClip, kCispo, kSapo };
// How token losses become the step loss, mapped onto the SDK's aggregation modes.
enum class GrpoLossType { kGrpo, kBnpo, kDapo, kDrGrpo };

const char* loss_type_name(GrpoLossType type);
const char* policy_loss_name(PolicyLoss loss);

// The defaults live with the keys (grpo_config.cpp); the zeros below are only
// the state of a config nothing was read into.
struct GrpoConfig {
  int64_t num_generations = 0;  // G completions per prompt
  int64_t max_completion_length = 0;
  sdk::SamplingParams sampling;       // temperature, top_k/p, min_p, repetition penalty, stop strings
  int64_t generation_batch_size = 0;  // sequences decoded together; 0: all of the rank's step
  int64_t num_iterations = 0;         // μ: updates per generated batch
  double eval_temperature = 0.0;      // held-out completions ([eval]); 0: greedy

  std::vector<std::string> reward_funcs;    // built-in names, functions of reward_plugins, python:/http:// specs
  std::vector<std::string> reward_names;    // one per reward_funcs entry then per reward model, for metrics (resolved)
  std::vector<std::string> reward_plugins;  // reward libraries: paths or names
  std::vector<std::string> reward_models;   // sequence-classification model directories, rewards after reward_funcs
  std::vector<double> reward_weights;       // one per reward_names entry (resolved: never empty)
  RewardAggregation reward_aggregation = RewardAggregation::kSumThenNormalize;
  ScaleRewards scale_rewards = ScaleRewards::kGroup;
  std::string answer_field;
  std::string format_pattern;
  int64_t overlong_cache = 0;  // DAPO's soft overlong zone, in tokens (resolved: never 0)

  double epsilon_low = 0.0;
  double epsilon_high = 0.0;    // resolved: epsilon_low when unset
  std::optional<double> delta;  // dual-clip bound for negative advantages
  PolicyLoss policy_loss = PolicyLoss::kClip;
  double cispo_epsilon_low = 0.0;  // CISPO's weight is clipped to [1 − ε_low^IS, 1 + ε_high^IS]
  double cispo_epsilon_high = 0.0;
  double sapo_tau_pos = 0.0;  // SAPO's gate temperature for A > 0
  double sapo_tau_neg = 0.0;  // and for A ≤ 0
  ImportanceSampling importance_sampling = ImportanceSampling::kToken;
  double beta = 0.0;
  KlEstimator kl_estimator = KlEstimator::kK3;
  std::string reference_model;
  bool mask_truncated_completions = false;
  double top_entropy_quantile = 0.0;
  bool filter_zero_std_groups = false;
  int64_t max_generation_rounds = 0;  // > 1: refill the step with informative groups (DAPO)
  GrpoLossType loss_type = GrpoLossType::kDapo;
  sdk::AggregationSpec aggregation;  // loss_type mapped onto the SDK's modes
};

// Every reward as the config names it: the reward_funcs entries, then the
// reward_models directories (the order of reward_names and reward_weights).
std::vector<std::string> reward_entries(const GrpoConfig& config);

void declare_grpo_config(sdk::ConfigSchema& schema);

// Throws sdk::ConfigError naming file:line and key of a bad value or combination.
GrpoConfig read_grpo_config(const sdk::ConfigValues& values);

// Every key at its default, resolved as read_grpo_config() resolves it.
GrpoConfig default_grpo_config();

}  // namespace ptrain::grpo
