#include "grpo_config.h"

#include "grpo_reward_models.h"
#include "grpo_rewards.h"

#include "ptrain/sdk/errors.h"
#include "ptrain/sdk/util/config_binder.h"

#include <algorithm>
#include <cmath>
#include <regex>

namespace ptrain::grpo {
namespace {

using C = GrpoConfig;

const sdk::Choices<GrpoLossType>& loss_type_choices() {
  static const sdk::Choices<GrpoLossType> choices{{"grpo", GrpoLossType::kGrpo},
                                                  {"bnpo", GrpoLossType::kBnpo},
                                                  {"dapo", GrpoLossType::kDapo},
                                                  {"dr_grpo", GrpoLossType::kDrGrpo}};
  return choices;
}

const sdk::Choices<PolicyLoss>& policy_loss_choices() {
  static const sdk::Choices<PolicyLoss> choices{
      {"clip", PolicyLoss::kClip}, {"cispo", PolicyLoss::kCispo}, {"sapo", PolicyLoss::kSapo}};
  return choices;
}

// Rollouts: how many, how long, and how they are sampled.
void bind_generation(sdk::ConfigBinder<C>& binder) {
  binder
      .key("num_generations", &C::num_generations, 8,
           "G: completions sampled per prompt; a prompt's G completions form its group", sdk::at_least(2))
      .key("max_completion_length", &C::max_completion_length, 256,
           "most tokens a completion may have (<eos> included)", sdk::at_least(1))
      .key(
          "temperature", [](auto& c) -> auto& { return c.sampling.temperature; }, 1.0,
          "sampling temperature; 0: greedy", sdk::at_least(0.0))
      .key("eval_temperature", &C::eval_temperature, 0.0,
           "temperature of the one completion per held-out prompt an evaluation ([eval]) scores; 0: greedy",
           sdk::at_least(0.0))
      .key(
          "top_k", [](auto& c) -> auto& { return c.sampling.top_k; }, 0,
          "sample among the k most likely tokens; 0: off", sdk::at_least(0))
      .key(
          "top_p", [](auto& c) -> auto& { return c.sampling.top_p; }, 1.0,
          "nucleus sampling: the smallest set of tokens with probability ≥ top_p", sdk::between(1e-9, 1.0))
      .key(
          "min_p", [](auto& c) -> auto& { return c.sampling.min_p; }, 0.0,
          "drop tokens less likely than min_p × the most likely one", sdk::between(0.0, 1.0))
      .key(
          "repetition_penalty", [](auto& c) -> auto& { return c.sampling.repetition_penalty; }, 1.0,
          "CTRL's penalty on tokens already in prompt or completion; 1: off", sdk::at_least(1e-9))
      .key(
          "stop_strings", [](auto& c) -> auto& { return c.sampling.stop_strings; }, std::vector<std::string>{},
          "texts that end a completion (kept in it); empty: none")
      .key("generation_batch_size", &C::generation_batch_size, 0,
           "sequences decoded together; 0: all of a rank's step at once", sdk::at_least(0))
      .key("num_iterations", &C::num_iterations, 1,
           "μ: optimizer updates per generated batch (the same rollouts reused)", sdk::at_least(1));
}

// Rewards and the advantages computed from them.
void bind_rewards(sdk::ConfigBinder<C>& binder) {
  binder
      .key("reward_funcs", &C::reward_funcs, std::vector<std::string>{"accuracy", "format"},
           "reward functions: the built-in accuracy (answer exact match), format (format_pattern), length (DAPO's "
           "soft overlong penalty), closeness (numeric partial credit), a function of a library in "
           "reward_plugins, python:FILE.py:FUNCTION (a Python function) or http://HOST:PORT/PATH (a reward "
           "server; #timeout_s=S&retries=N after it) (docs/grpo.md)")
      .key("reward_plugins", &C::reward_plugins, std::vector<std::string>{},
           "reward libraries whose functions reward_funcs may name: paths to their .so, or names found as "
           "libptrain_reward_<name>.so on the plugin path (docs/grpo.md)")
      .key("reward_models", &C::reward_models, std::vector<std::string>{},
           "reward models: Hugging Face sequence-classification model directories (config.json, safetensors with "
           "score.weight, tokenizer.json, tokenizer_config.json with a chat template), each a reward named after "
           "its directory that scores the prompt and completion as a conversation (docs/grpo.md)")
      .key("reward_weights", &C::reward_weights, std::vector<double>{},
           "one weight per reward function, then one per reward model; empty: all 1")
      .choice("reward_aggregation", &C::reward_aggregation,
              sdk::Choices<RewardAggregation>{{"sum_then_normalize", RewardAggregation::kSumThenNormalize},
                                              {"normalize_then_sum", RewardAggregation::kNormalizeThenSum}},
              RewardAggregation::kSumThenNormalize,
              "sum_then_normalize: advantages of the weighted reward sum; normalize_then_sum (GDPO, as TRL's "
              "multi_objective_aggregation): each function's rewards normalised within their group, weighted, "
              "summed, then normalised over the global batch (scale_rewards does not act)")
      .choice("scale_rewards", &C::scale_rewards,
              sdk::Choices<ScaleRewards>{
                  {"group", ScaleRewards::kGroup}, {"batch", ScaleRewards::kBatch}, {"none", ScaleRewards::kNone}},
              ScaleRewards::kGroup,
              "divide advantages by the group's reward std (group), the global batch's (batch), or not (none); "
              "reward_aggregation = sum_then_normalize only")
      .key("answer_field", &C::answer_field, "answer", "the dataset field the accuracy reward compares with")
      .key("format_pattern", &C::format_pattern, "^-?[0-9]+$",
           "ECMAScript regex the whole completion text must match for the format reward (and end with <eos> or a "
           "stop string)")
      .key("overlong_cache", &C::overlong_cache, 0,
           "length reward: tokens before max_completion_length where the penalty ramps from 0 to −1; 0: a quarter "
           "of max_completion_length",
           sdk::at_least(0));
}

// Multi-turn episodes with an environment library (grpo_episodes.h).
void bind_environment(sdk::ConfigBinder<C>& binder) {
  binder
      .key("environment", &C::environment, "",
           "a multi-turn environment: a path to its library (.so) or a name found as libptrain_env_<name>.so on "
           "the plugin path; each rollout is then an episode whose reward is the environment's (docs/grpo.md); "
           "empty: single-turn completions")
      .key("max_turns", &C::max_turns, 4, "with environment: assistant turns an episode may take", sdk::at_least(1))
      .key("environment_weight", &C::environment_weight, 1.0,
           "with environment: the weight of its reward (metric rewards/environment) in the sum with the rewards of "
           "reward_funcs and reward_models");
}

// The clipped policy loss, its KL term and which tokens it trains on.
void bind_loss(sdk::ConfigBinder<C>& binder) {
  binder
      .key("epsilon_low", &C::epsilon_low, 0.2, "ε_low: the ratio is clipped below at 1 − ε_low",
           sdk::between(0.0, 1.0))
      .key("epsilon_high", &C::epsilon_high, sdk::unset,
           "ε_high: clipped above at 1 + ε_high (DAPO's clip-higher); unset: ε_low", sdk::at_least(0.0))
      .key("delta", &C::delta, sdk::unset,
           "dual-clip: for negative advantages the loss is at most −A·δ (δ > 1); unset: off", sdk::at_least(1.0))
      .choice("policy_loss", &C::policy_loss, policy_loss_choices(), PolicyLoss::kClip,
              "clip: PPO's clipped surrogate (epsilon_low/high, delta); cispo: MiniMax-M1's clipped, detached "
              "importance weight times −A·log π (cispo_epsilon_low/high); sapo: Qwen's soft sigmoid gate on the "
              "ratio (sapo_tau_pos/neg)")
      .key("cispo_epsilon_low", &C::cispo_epsilon_low, 1.0,
           "ε_low^IS: CISPO's weight is clipped below at 1 − ε_low^IS (1: no lower bound, as MiniMax-M1)",
           sdk::between(0.0, 1.0))
      .key("cispo_epsilon_high", &C::cispo_epsilon_high, 0.28,
           "ε_high^IS: CISPO's weight is clipped above at 1 + ε_high^IS", sdk::at_least(0.0))
      .key("sapo_tau_pos", &C::sapo_tau_pos, 1.0, "τ_pos: SAPO's gate temperature for positive advantages",
           sdk::above(0.0))
      .key("sapo_tau_neg", &C::sapo_tau_neg, 1.05,
           "τ_neg: SAPO's gate temperature for negative advantages (the paper: τ_neg > τ_pos)", sdk::above(0.0))
      .choice("importance_sampling_level", &C::importance_sampling,
              sdk::Choices<ImportanceSampling>{{"token", ImportanceSampling::kToken},
                                               {"sequence", ImportanceSampling::kSequence}},
              ImportanceSampling::kToken,
              "token: a ratio per token (GRPO); sequence: one length-normalised ratio per completion (GSPO)")
      .key("beta", &C::beta, 0.0, "β: weight of the KL penalty to the reference; 0: no reference model is built",
           sdk::at_least(0.0))
      .choice("kl_estimator", &C::kl_estimator,
              sdk::Choices<KlEstimator>{{"k1", KlEstimator::kK1}, {"k2", KlEstimator::kK2}, {"k3", KlEstimator::kK3}},
              KlEstimator::kK3, "per-token KL estimator (Schulman 2020): k1, k2 or k3")
      .key("reference_model", &C::reference_model, "",
           "a Hugging Face model directory as the KL reference; empty: a frozen copy of the initial policy")
      .key("mask_truncated_completions", &C::mask_truncated_completions, false,
           "completions that hit max_completion_length without <eos> add no loss units")
      .key("top_entropy_quantile", &C::top_entropy_quantile, 1.0,
           "ρ: train only on the tokens whose entropy is in the global batch's top ρ fraction; 1: all",
           sdk::between(0.0, 1.0))
      .key("filter_zero_std_groups", &C::filter_zero_std_groups, false,
           "DAPO's dynamic sampling: groups whose rewards are all equal add no loss units")
      .key("max_generation_rounds", &C::max_generation_rounds, 1,
           "with filter_zero_std_groups: generation rounds a step may take to fill its batch with informative "
           "groups, each on the prompts of the next global batch of the epoch order (DAPO); 1: no refill",
           sdk::at_least(1))
      .choice("loss_type", &C::loss_type, loss_type_choices(), GrpoLossType::kDapo,
              "grpo: mean over completions of their token mean; bnpo / dapo: mean over all completion tokens of the "
              "update; dr_grpo: token sums / max_completion_length, mean over completions");
}

const sdk::ConfigBinder<C>& binder() {
  static const auto binder = [] {
    sdk::ConfigBinder<C> built;
    bind_generation(built);
    bind_rewards(built);
    bind_environment(built);
    bind_loss(built);
    return built;
  }();
  return binder;
}

std::string join(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "" : ", ") + name;
  return text;
}

// Reward functions and libraries each listed once; without libraries every
// function must be a built-in one (library functions are checked in setup(),
// once the libraries are loaded).
void check_reward_names(const sdk::ConfigValues& values, const C& config) {
  if (config.reward_funcs.empty() && config.reward_models.empty() && config.environment.empty()) {
    throw sdk::ConfigError(values.where("reward_funcs") +
                           ": expected at least one reward function (or a reward model in module.reward_models), or "
                           "a module.environment (whose reward counts)");
  }
  const std::vector<std::string> builtins = sdk::builtin_reward_names();
  for (const std::string& name : config.reward_funcs) {
    if (std::count(config.reward_funcs.begin(), config.reward_funcs.end(), name) > 1) {
      throw sdk::ConfigError(values.where("reward_funcs") + ": '" + name + "' is listed twice");
    }
    if (const std::optional<sdk::RewardSource> source = sdk::reward_source_of(name)) {
      check_reward_source(values, name, *source);
    } else if (config.reward_plugins.empty() && std::find(builtins.begin(), builtins.end(), name) == builtins.end()) {
      throw sdk::ConfigError(values.where("reward_funcs") + ": unknown reward function '" + name +
                             "'; expected a built-in one (" + join(builtins) +
                             ") or a function of a library listed in module.reward_plugins (none is)");
    }
  }
  for (const char* key : {"reward_plugins", "reward_models"}) {
    const std::vector<std::string>& entries =
        std::string(key) == "reward_plugins" ? config.reward_plugins : config.reward_models;
    for (const std::string& entry : entries) {
      if (entry.empty()) throw sdk::ConfigError(values.where(key) + ": an entry is empty");
      if (std::count(entries.begin(), entries.end(), entry) > 1) {
        throw sdk::ConfigError(values.where(key) + ": '" + entry + "' is listed twice");
      }
    }
  }
}

// Metric names (rewards/<name>/mean): a python: spec's function name, a
// reward server's URL without http:// and settings, else the entry itself;
// no two alike.
void resolve_reward_names(const sdk::ConfigValues& values, C& config) {
  config.reward_names.clear();
  for (const std::string& entry : config.reward_funcs) {
    const std::optional<sdk::RewardSource> source = sdk::reward_source_of(entry);
    const std::string name = source ? source->metric_name : entry;
    if (std::find(config.reward_names.begin(), config.reward_names.end(), name) != config.reward_names.end()) {
      throw sdk::ConfigError(values.where("reward_funcs") + ": two reward functions are named '" + name +
                             "' (their metrics rewards/" + name + "/...); rename one");
    }
    config.reward_names.push_back(name);
  }
  for (const std::string& dir : config.reward_models) {
    const std::string name = reward_model_name(dir);
    if (name.empty() || name == "." || name == "..") {
      throw sdk::ConfigError(values.where("reward_models") + ": '" + dir +
                             "' names no directory the reward can be named after; give its path, e.g. models/rm");
    }
    if (std::find(config.reward_names.begin(), config.reward_names.end(), name) != config.reward_names.end()) {
      throw sdk::ConfigError(values.where("reward_models") + ": the reward model '" + dir + "' would be named '" +
                             name + "' (its metrics rewards/" + name +
                             "/...) like another reward; rename its directory");
    }
    config.reward_names.push_back(name);
  }
}

// reward_weights as given (one per function), or all 1; format_pattern a
// valid regex; overlong_cache resolved and within the completion length.
void resolve_reward_options(const sdk::ConfigValues& values, C& config) {
  const size_t num_rewards = config.reward_names.size();
  if (config.reward_weights.empty()) {
    config.reward_weights.assign(num_rewards, 1.0);
  } else if (config.reward_weights.size() != num_rewards) {
    throw sdk::ConfigError(values.where("reward_weights") + ": expected " + std::to_string(num_rewards) +
                           " weights (one per reward function in reward_funcs, then one per reward model in "
                           "reward_models), got " +
                           std::to_string(config.reward_weights.size()));
  }
  try {
    std::regex check(config.format_pattern);
  } catch (const std::regex_error& error) {
    throw sdk::ConfigError(values.where("format_pattern") + ": not a valid regex: " + error.what());
  }
  if (config.overlong_cache == 0) config.overlong_cache = std::max<int64_t>(1, config.max_completion_length / 4);
  if (config.overlong_cache > config.max_completion_length) {
    throw sdk::ConfigError(values.where("overlong_cache") +
                           ": must be <= max_completion_length = " + std::to_string(config.max_completion_length));
  }
}

// A float key the user moved off its default (or set, when it has none).
// A resolved config.toml writes every default out and must load again.
bool set_off_default(const sdk::ConfigValues& values, const sdk::ConfigValues& defaults, const char* key) {
  if (!values.set_by_user(key)) return false;
  return !defaults.has(key) || values.get_float(key) != defaults.get_float(key);
}

// The environment's reward is one more reward column, the last, named
// "environment"; its keys do nothing without one.
void resolve_environment(const sdk::ConfigValues& values, const sdk::ConfigValues& defaults, C& config) {
  if (config.environment.empty()) {
    const bool turns_set =
        values.set_by_user("max_turns") && values.get_int("max_turns") != defaults.get_int("max_turns");
    const char* key = turns_set                                                 ? "max_turns"
                      : set_off_default(values, defaults, "environment_weight") ? "environment_weight"
                                                                                : nullptr;
    if (key != nullptr) {
      throw sdk::ConfigError(values.where(key) +
                             ": applies to multi-turn episodes, but module.environment is empty; set it or remove " +
                             key);
    }
    return;
  }
  const std::vector<std::string>& names = config.reward_names;
  if (std::find(names.begin(), names.end(), "environment") != names.end()) {
    throw sdk::ConfigError(values.where("reward_funcs") +
                           ": a reward function is named 'environment', the name of module.environment's reward "
                           "(rewards/environment/...); rename it");
  }
  config.reward_names.push_back("environment");
  config.reward_weights.push_back(config.environment_weight);
}

// Keys of one policy loss set while another is chosen: refused, since they would do nothing.
void check_policy_loss_keys(const sdk::ConfigValues& values, const C& config) {
  const std::vector<std::pair<PolicyLoss, std::vector<const char*>>> owners{
      {PolicyLoss::kClip, {"epsilon_low", "epsilon_high", "delta"}},
      {PolicyLoss::kCispo, {"cispo_epsilon_low", "cispo_epsilon_high"}},
      {PolicyLoss::kSapo, {"sapo_tau_pos", "sapo_tau_neg"}}};
  const sdk::ConfigValues defaults = sdk::ConfigValues::defaults_of(binder().schema(), values.section());
  for (const auto& [owner, keys] : owners) {
    if (owner == config.policy_loss) continue;
    for (const char* key : keys) {
      if (set_off_default(values, defaults, key)) {
        throw sdk::ConfigError(values.where(key) + ": applies to policy_loss = \"" +
                               sdk::choice_name(policy_loss_choices(), owner) + "\", but policy_loss is \"" +
                               sdk::choice_name(policy_loss_choices(), config.policy_loss) + "\"; remove it");
      }
    }
  }
}

// Refill needs the filter that makes groups uninformative.
void check_dynamic_sampling(const sdk::ConfigValues& values, const C& config) {
  if (config.max_generation_rounds > 1 && !config.filter_zero_std_groups) {
    throw sdk::ConfigError(values.where("max_generation_rounds") + ": refilling the batch (" +
                           std::to_string(config.max_generation_rounds) +
                           " rounds) replaces the groups filter_zero_std_groups drops, but "
                           "module.filter_zero_std_groups is false; set it to true, or max_generation_rounds = 1");
  }
}

// ε_high, the dual-clip bound, the reference model and loss_type's aggregation.
void resolve_loss_options(const sdk::ConfigValues& values, C& config) {
  check_policy_loss_keys(values, config);
  check_dynamic_sampling(values, config);
  if (!values.has("epsilon_high")) config.epsilon_high = config.epsilon_low;
  if (config.delta && *config.delta <= 1.0) {
    throw sdk::ConfigError(values.where("delta") + ": the dual-clip bound must be > 1, got " +
                           std::to_string(*config.delta));
  }
  if (config.beta == 0.0 && !config.reference_model.empty()) {
    throw sdk::ConfigError(values.where("reference_model") +
                           ": a reference model is set but module.beta = 0, so no KL term uses it; set beta > 0");
  }
  switch (config.loss_type) {
    case GrpoLossType::kGrpo:
      config.aggregation.mode = sdk::LossAggregation::kSeqMeanTokenMean;
      break;
    case GrpoLossType::kDrGrpo:
      config.aggregation.mode = sdk::LossAggregation::kSeqMeanTokenSumNorm;
      config.aggregation.norm_constant = static_cast<double>(config.max_completion_length);
      break;
    case GrpoLossType::kBnpo:
    case GrpoLossType::kDapo:
      config.aggregation.mode = sdk::LossAggregation::kTokenMean;
      break;
  }
}

}  // namespace

const char* loss_type_name(GrpoLossType type) { return sdk::choice_name(loss_type_choices(), type).c_str(); }

const char* policy_loss_name(PolicyLoss loss) { return sdk::choice_name(policy_loss_choices(), loss).c_str(); }

std::vector<std::string> reward_entries(const GrpoConfig& config) {
  std::vector<std::string> entries = config.reward_funcs;
  entries.insert(entries.end(), config.reward_models.begin(), config.reward_models.end());
  return entries;
}

void declare_grpo_config(sdk::ConfigSchema& schema) { binder().declare(schema); }

// An empty stop string stops nothing (no completion text ends at it): refused
// like the other settings that would do nothing.
void check_stop_strings(const sdk::ConfigValues& values, const C& config) {
  const std::vector<std::string>& stops = config.sampling.stop_strings;
  const auto empty = std::find(stops.begin(), stops.end(), std::string());
  if (empty != stops.end()) {
    throw sdk::ConfigError(values.where("stop_strings") + ": stop_strings[" + std::to_string(empty - stops.begin()) +
                           "] is empty, which stops nothing; remove it");
  }
}

GrpoConfig read_grpo_config(const sdk::ConfigValues& values) {
  GrpoConfig config = binder().read(values);
  config.sampling.max_new_tokens = config.max_completion_length;
  check_stop_strings(values, config);
  check_reward_names(values, config);
  resolve_reward_names(values, config);
  resolve_reward_options(values, config);
  resolve_environment(values, sdk::ConfigValues::defaults_of(binder().schema(), values.section()), config);
  resolve_loss_options(values, config);
  return config;
}

GrpoConfig default_grpo_config() {
  return read_grpo_config(sdk::ConfigValues::defaults_of(binder().schema(), "module"));
}

}  // namespace ptrain::grpo
