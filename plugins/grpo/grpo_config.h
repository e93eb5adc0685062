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
// How token losses become the step loss, mapped onto the SDK's aggregation modes.
enum class GrpoLossType { kGrpo, kBnpo, kDapo, kDrGrpo };

const char* loss_type_name(GrpoLossType type);

// The defaults live with the keys (grpo_config.cpp); the zeros below are only
// the state of a config nothing was read into.
struct GrpoConfig {
  int64_t num_generations = 0;  // G completions per prompt
  int64_t max_completion_length = 0;
  sdk::SamplingParams sampling;       // temperature, top_k/p, min_p, repetition penalty, stop strings
  int64_t generation_batch_size = 0;  // sequences decoded together; 0: all of the rank's step
  int64_t num_iterations = 0;         // μ: updates per generated batch

  std::vector<std::string> reward_funcs;    // built-in names, functions of reward_plugins, python:/http:// specs
  std::vector<std::string> reward_names;    // one per reward_funcs entry, for metrics (resolved: a spec's function)
  std::vector<std::string> reward_plugins;  // reward libraries: paths or names
  std::vector<double> reward_weights;       // one per reward function (resolved: never empty)
  RewardAggregation reward_aggregation = RewardAggregation::kSumThenNormalize;
  ScaleRewards scale_rewards = ScaleRewards::kGroup;
  std::string answer_field;
  std::string format_pattern;
  int64_t overlong_cache = 0;  // DAPO's soft overlong zone, in tokens (resolved: never 0)

  double epsilon_low = 0.0;
  double epsilon_high = 0.0;    // resolved: epsilon_low when unset
  std::optional<double> delta;  // dual-clip bound for negative advantages
  ImportanceSampling importance_sampling = ImportanceSampling::kToken;
  double beta = 0.0;
  KlEstimator kl_estimator = KlEstimator::kK3;
  std::string reference_model;
  bool mask_truncated_completions = false;
  double top_entropy_quantile = 0.0;
  bool filter_zero_std_groups = false;
  GrpoLossType loss_type = GrpoLossType::kDapo;
  sdk::AggregationSpec aggregation;  // loss_type mapped onto the SDK's modes
};

void declare_grpo_config(sdk::ConfigSchema& schema);

// Throws sdk::ConfigError naming file:line and key of a bad value or combination.
GrpoConfig read_grpo_config(const sdk::ConfigValues& values);

// Every key at its default, resolved as read_grpo_config() resolves it.
GrpoConfig default_grpo_config();

}  // namespace ptrain::grpo
