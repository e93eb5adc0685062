#include "grpo_config.h"

#include "grpo_rewards.h"

#include "ptrain/sdk/errors.h"

#include <algorithm>
#include <cmath>
#include <regex>

namespace ptrain::grpo {
namespace {

std::string join(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "" : ", ") + name;
  return text;
}

}  // namespace

void declare_grpo_config(sdk::ConfigSchema& schema) {
  schema.add_int("num_generations", 8, "G: completions sampled per prompt; a prompt's G completions form its group", 2);
  schema.add_int("max_completion_length", 256, "most tokens a completion may have (<eos> included)", 1);
  schema.add_float("temperature", 1.0, "sampling temperature; 0: greedy", 0.0);
  schema.add_int("top_k", 0, "sample among the k most likely tokens; 0: off", 0);
  schema.add_float("top_p", 1.0, "nucleus sampling: the smallest set of tokens with probability ≥ top_p", 1e-9, 1.0);
  schema.add_float("min_p", 0.0, "drop tokens less likely than min_p × the most likely one", 0.0, 1.0);
  schema.add_float("repetition_penalty", 1.0, "CTRL's penalty on tokens already in prompt or completion; 1: off", 1e-9);
  schema.add_string_list("stop_strings", std::vector<std::string>{},
                         "texts that end a completion (kept in it); empty: none");
  schema.add_int("generation_batch_size", 0, "sequences decoded together; 0: all of a rank's step at once", 0);
  schema.add_int("num_iterations", 1, "μ: optimizer updates per generated batch (the same rollouts reused)", 1);
  schema.add_string_list("reward_funcs", std::vector<std::string>{"accuracy", "format"},
                         "reward functions: the built-in accuracy (answer exact match), format (format_pattern), "
                         "length (DAPO's soft overlong penalty), closeness (numeric partial credit), or a function "
                         "of a library in reward_plugins");
  schema.add_string_list("reward_plugins", std::vector<std::string>{},
                         "reward libraries whose functions reward_funcs may name: paths to their .so, or names "
                         "found as libptrain_reward_<name>.so on the plugin path (docs/grpo.md)");
  schema.add_float_list("reward_weights", std::vector<double>{},
                        "one weight per reward function; empty: all 1");
  schema.add_string("reward_aggregation", "sum_then_normalize",
                    "sum_then_normalize: advantages of the weighted reward sum; normalize_then_sum (GDPO, as TRL's "
                    "multi_objective_aggregation): each function's rewards normalised within their group, weighted, "
                    "summed, then normalised over the global batch (scale_rewards does not act)",
                    {"sum_then_normalize", "normalize_then_sum"});
  schema.add_string("scale_rewards", "group",
                    "divide advantages by the group's reward std (group), the global batch's (batch), or not (none); "
                    "reward_aggregation = sum_then_normalize only",
                    {"group", "batch", "none"});
  schema.add_string("answer_field", "answer", "the dataset field the accuracy reward compares with");
  schema.add_string("format_pattern", "^-?[0-9]+$",
                    "ECMAScript regex the whole completion text must match for the format reward (and end with <eos> "
                    "or a stop string)");
  schema.add_int("overlong_cache", 0,
                 "length reward: tokens before max_completion_length where the penalty ramps from 0 to −1; 0: a "
                 "quarter of max_completion_length",
                 0);
  schema.add_float("epsilon_low", 0.2, "ε_low: the ratio is clipped below at 1 − ε_low", 0.0, 1.0);
  schema.add_float("epsilon_high", std::nullopt,
                   "ε_high: clipped above at 1 + ε_high (DAPO's clip-higher); unset: ε_low", 0.0);
  schema.add_float("delta", std::nullopt,
                   "dual-clip: for negative advantages the loss is at most −A·δ (δ > 1); unset: off", 1.0);
  schema.add_string("importance_sampling_level", "token",
                    "token: a ratio per token (GRPO); sequence: one length-normalised ratio per completion (GSPO)",
                    {"token", "sequence"});
  schema.add_float("beta", 0.0, "β: weight of the KL penalty to the reference; 0: no reference model is built", 0.0);
  schema.add_string("kl_estimator", "k3", "per-token KL estimator (Schulman 2020): k1, k2 or k3", {"k1", "k2", "k3"});
  schema.add_string("reference_model", "",
                    "a Hugging Face model directory as the KL reference; empty: a frozen copy of the initial policy");
  schema.add_bool("mask_truncated_completions", false,
                  "completions that hit max_completion_length without <eos> add no loss units");
  schema.add_float("top_entropy_quantile", 1.0,
                   "ρ: train only on the tokens whose entropy is in the global batch's top ρ fraction; 1: all", 0.0,
                   1.0);
  schema.add_bool("filter_zero_std_groups", false,
                  "DAPO's dynamic sampling: groups whose rewards are all equal add no loss units");
  schema.add_string("loss_type", "dapo",
                    "grpo: mean over completions of their token mean; bnpo / dapo: mean over all completion tokens "
                    "of the update; dr_grpo: token sums / max_completion_length, mean over completions",
                    {"grpo", "bnpo", "dapo", "dr_grpo"});
}

GrpoConfig read_grpo_config(const sdk::ConfigValues& values) {
  GrpoConfig config;
  config.num_generations = values.get_int("num_generations");
  config.max_completion_length = values.get_int("max_completion_length");
  config.sampling.temperature = values.get_float("temperature");
  config.sampling.top_k = values.get_int("top_k");
  config.sampling.top_p = values.get_float("top_p");
  config.sampling.min_p = values.get_float("min_p");
  config.sampling.repetition_penalty = values.get_float("repetition_penalty");
  config.sampling.stop_strings = values.get_string_list("stop_strings");
  config.sampling.max_new_tokens = config.max_completion_length;
  config.generation_batch_size = values.get_int("generation_batch_size");
  config.num_iterations = values.get_int("num_iterations");

  config.reward_funcs = values.get_string_list("reward_funcs");
  if (config.reward_funcs.empty()) {
    throw sdk::ConfigError(values.where("reward_funcs") + ": expected at least one reward function");
  }
  config.reward_plugins = values.get_string_list("reward_plugins");
  const std::vector<std::string> builtins = builtin_reward_list();
  for (const std::string& name : config.reward_funcs) {
    if (std::count(config.reward_funcs.begin(), config.reward_funcs.end(), name) > 1) {
      throw sdk::ConfigError(values.where("reward_funcs") + ": '" + name + "' is listed twice");
    }
    // Names of library functions are checked in setup(), once the libraries are loaded.
    if (config.reward_plugins.empty() && std::find(builtins.begin(), builtins.end(), name) == builtins.end()) {
      throw sdk::ConfigError(values.where("reward_funcs") + ": unknown reward function '" + name +
                             "'; expected a built-in one (" + join(builtins) +
                             ") or a function of a library listed in module.reward_plugins (none is)");
    }
  }
  for (const std::string& library : config.reward_plugins) {
    if (library.empty()) throw sdk::ConfigError(values.where("reward_plugins") + ": an entry is empty");
    if (std::count(config.reward_plugins.begin(), config.reward_plugins.end(), library) > 1) {
      throw sdk::ConfigError(values.where("reward_plugins") + ": '" + library + "' is listed twice");
    }
  }
  config.reward_weights.assign(config.reward_funcs.size(), 1.0);
  const std::vector<double>& weights = values.get_float_list("reward_weights");
  if (!weights.empty()) {
    if (weights.size() != config.reward_funcs.size()) {
      throw sdk::ConfigError(values.where("reward_weights") + ": expected " +
                             std::to_string(config.reward_funcs.size()) + " weights (one per reward function), got " +
                             std::to_string(weights.size()));
    }
    config.reward_weights = weights;
  }
  config.reward_aggregation = values.get_string("reward_aggregation") == "normalize_then_sum"
                                  ? RewardAggregation::kNormalizeThenSum
                                  : RewardAggregation::kSumThenNormalize;
  const std::string& scale = values.get_string("scale_rewards");
  config.scale_rewards = scale == "group"   ? ScaleRewards::kGroup
                         : scale == "batch" ? ScaleRewards::kBatch
                                            : ScaleRewards::kNone;
  config.answer_field = values.get_string("answer_field");
  config.format_pattern = values.get_string("format_pattern");
  try {
    std::regex check(config.format_pattern);
  } catch (const std::regex_error& error) {
    throw sdk::ConfigError(values.where("format_pattern") + ": not a valid regex: " + error.what());
  }
  const int64_t cache = values.get_int("overlong_cache");
  config.overlong_cache = cache > 0 ? cache : std::max<int64_t>(1, config.max_completion_length / 4);
  if (config.overlong_cache > config.max_completion_length) {
    throw sdk::ConfigError(values.where("overlong_cache") +
                           ": must be <= max_completion_length = " + std::to_string(config.max_completion_length));
  }

  config.epsilon_low = values.get_float("epsilon_low");
  config.epsilon_high = values.has("epsilon_high") ? values.get_float("epsilon_high") : config.epsilon_low;
  if (values.has("delta")) {
    config.delta = values.get_float("delta");
    if (*config.delta <= 1.0) {
      throw sdk::ConfigError(values.where("delta") + ": the dual-clip bound must be > 1, got " +
                             std::to_string(*config.delta));
    }
  }
  config.importance_sampling = values.get_string("importance_sampling_level") == "sequence"
                                   ? ImportanceSampling::kSequence
                                   : ImportanceSampling::kToken;
  config.beta = values.get_float("beta");
  const std::string& estimator = values.get_string("kl_estimator");
  config.kl_estimator = estimator == "k1" ? KlEstimator::kK1 : estimator == "k2" ? KlEstimator::kK2 : KlEstimator::kK3;
  config.reference_model = values.get_string("reference_model");
  if (config.beta == 0.0 && !config.reference_model.empty()) {
    throw sdk::ConfigError(values.where("reference_model") +
                           ": a reference model is set but module.beta = 0, so no KL term uses it; set beta > 0");
  }
  config.mask_truncated_completions = values.get_bool("mask_truncated_completions");
  config.top_entropy_quantile = values.get_float("top_entropy_quantile");
  config.filter_zero_std_groups = values.get_bool("filter_zero_std_groups");

  config.loss_type = values.get_string("loss_type");
  if (config.loss_type == "grpo") {
    config.aggregation.mode = sdk::LossAggregation::kSeqMeanTokenMean;
  } else if (config.loss_type == "dr_grpo") {
    config.aggregation.mode = sdk::LossAggregation::kSeqMeanTokenSumNorm;
    config.aggregation.norm_constant = static_cast<double>(config.max_completion_length);
  } else {
    config.aggregation.mode = sdk::LossAggregation::kTokenMean;
  }
  return config;
}

}  // namespace ptrain::grpo
