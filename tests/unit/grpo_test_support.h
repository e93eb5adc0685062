// Helpers shared by the GRPO tests: fixed rollouts injected through a
// context whose rollout engine returns them, a [module] table from the
// plugin's schema, and an independent full-batch reference of the step loss
// computed from the formulas (docs/grpo.md), one unpadded sequence at a time
// through model.logits + log_softmax. The world-size-2 worker reuses them.
#pragma once

#include "support/test_util.h"

#include "core/model/causal_lm.h"
#include "core/tokenizer/byte_tokenizer.h"
#include "grpo_config.h"
#include "ptrain/sdk/config_schema.h"
#include "ptrain/sdk/context.h"
#include "ptrain/sdk/errors.h"
#include "ptrain/sdk/generation.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ptrain::grpo_test {

inline constexpr int64_t kMaxLength = 40;
inline constexpr int64_t kGenerations = 3;
inline constexpr int64_t kMaxCompletion = 8;

struct Prompt {
  std::string prompt;
  std::string answer;
  std::vector<std::string> completions;  // kGenerations each; "…" suffix: truncated (no <eos>)
};

// Four prompts × three completions: mixed groups, an all-correct group (zero
// reward variance), different lengths and a truncated completion.
inline std::vector<Prompt> global_batch_prompts() {
  return {{"1+1=", "2", {"2", "3", "22"}},
          {"a longer prompt 7*6=", "42", {"42", "42", "42"}},
          {"9-4=", "5", {"5", "six", "12345678…"}},
          {"q", "x", {"y", "x", "zz"}}};
}

// For dynamic sampling with refill: the four prompts above as the global
// batch of step 0, then steps 1 and 2 of the epoch order (4 prompts each).
// `informative`: 5 and 6 of step 1 and all of step 2 have mixed groups, so
// refilling step 0 (prompt 1 is flat) keeps 5, the first of them; otherwise
// every later group is flat and refill runs out of rounds.
inline std::vector<Prompt> refill_epoch_prompts(bool informative) {
  std::vector<Prompt> prompts = global_batch_prompts();
  const std::vector<std::string> mixed{"7", "8", "7"};
  const std::vector<std::string> flat{"1", "1", "1"};
  prompts.push_back({"2*1=", "2", flat});                        // 4: all wrong
  prompts.push_back({"3+4=", "7", informative ? mixed : flat});  // 5
  prompts.push_back({"5+2=", "7", informative ? mixed : flat});  // 6
  prompts.push_back({"0*5=", "1", flat});                        // 7: all right
  for (int i = 0; i < 4; ++i) prompts.push_back({"9-" + std::to_string(i) + "=", "7", informative ? mixed : flat});
  return prompts;
}

inline bool is_truncated(const std::string& text) { return text.size() >= 3 && text.substr(text.size() - 3) == "…"; }

// The completion's tokens: its bytes, then <eos> unless truncated (cut at kMaxCompletion).
inline std::vector<int64_t> completion_ids(const std::string& text) {
  std::vector<int64_t> ids;
  const std::string body = is_truncated(text) ? text.substr(0, text.size() - 3) : text;
  for (const unsigned char byte : body) ids.push_back(byte);
  if (!is_truncated(text)) ids.push_back(tokenizer::ByteTokenizer::kEos);
  if (static_cast<int64_t>(ids.size()) > kMaxCompletion) ids.resize(kMaxCompletion);
  return ids;
}

inline std::vector<sdk::Example> to_examples(const std::vector<Prompt>& prompts) {
  std::vector<sdk::Example> examples;
  for (size_t i = 0; i < prompts.size(); ++i) {
    examples.push_back({static_cast<int64_t>(i), "prompts.jsonl:" + std::to_string(i + 1),
                        nlohmann::json{{"prompt", prompts[i].prompt}, {"answer", prompts[i].answer}}});
  }
  return examples;
}

// Returns the completions of the table, whatever the policy would sample.
class FixedRolloutEngine final : public sdk::RolloutEngine {
 public:
  explicit FixedRolloutEngine(std::vector<Prompt> prompts) : prompts_(std::move(prompts)) {}
  std::vector<sdk::Rollout> generate(const std::vector<sdk::RolloutRequest>& requests, const sdk::SamplingParams&,
                                     int64_t) override {
    std::vector<sdk::Rollout> rollouts;
    for (const sdk::RolloutRequest& request : requests) {
      // A refill round asks for generation indices r·G + k: completion k again.
      const std::vector<std::string>& group = prompts_.at(request.prompt_index).completions;
      const std::string& text = group.at(static_cast<size_t>(request.generation_index) % group.size());
      sdk::Rollout rollout;
      rollout.completion_ids = completion_ids(text);
      rollout.stop_reason = is_truncated(text) ? sdk::StopReason::kLength : sdk::StopReason::kEos;
      rollouts.push_back(rollout);
    }
    ++calls;
    return rollouts;
  }
  int calls = 0;

 private:
  std::vector<Prompt> prompts_;
};

// A context that is `base` in everything but its rollout engine and, when
// one is given, the environment every open_environment() call forwards to.
class InjectedContext final : public sdk::Context {
 public:
  InjectedContext(sdk::Context& base, sdk::RolloutEngine& engine, sdk::Environment* environment = nullptr)
      : base_(base), engine_(engine), environment_(environment) {}
  sdk::RankInfo rank_info() const override { return base_.rank_info(); }
  sdk::RunInfo run_info() const override { return base_.run_info(); }
  sdk::LanguageModel& policy() override { return base_.policy(); }
  std::unique_ptr<sdk::LanguageModel> frozen_policy_copy() override { return base_.frozen_policy_copy(); }
  std::unique_ptr<sdk::LanguageModel> load_frozen_model(const std::string& dir) override {
    return base_.load_frozen_model(dir);
  }
  void all_reduce_sum(at::Tensor& tensor) override { base_.all_reduce_sum(tensor); }
  const sdk::Tokenizer& tokenizer() const override { return base_.tokenizer(); }
  const sdk::ConfigValues& module_config() const override { return base_.module_config(); }
  sdk::Logger& logger() override { return base_.logger(); }
  sdk::RolloutEngine& rollout_engine() override { return engine_; }
  std::unique_ptr<sdk::RewardLibrary> open_reward_library(const std::string& name_or_path) override {
    return base_.open_reward_library(name_or_path);
  }
  std::unique_ptr<sdk::Environment> open_environment(const std::string& name_or_path) override {
    if (environment_ == nullptr) return base_.open_environment(name_or_path);
    // The module owns what it opens; the test keeps the environment itself.
    struct Forward final : sdk::Environment {
      explicit Forward(sdk::Environment& target) : target(target) {}
      std::string name() const override { return target.name(); }
      std::unique_ptr<sdk::Episode> start(const sdk::Example& example) override { return target.start(example); }
      sdk::Environment& target;
    };
    return std::make_unique<Forward>(*environment_);
  }
  std::vector<const sdk::Example*> upcoming_examples(int64_t steps_ahead) override {
    return base_.upcoming_examples(steps_ahead);
  }

 private:
  sdk::Context& base_;
  sdk::RolloutEngine& engine_;
  sdk::Environment* environment_;
};

// [module] values: the schema's defaults, then `overrides` as if the user wrote them.
inline sdk::ConfigValues grpo_values(const std::map<std::string, sdk::ConfigValue>& overrides = {}) {
  sdk::ConfigSchema schema;
  grpo::declare_grpo_config(schema);
  sdk::ConfigValues values("module");
  for (const sdk::ConfigKey& key : schema.keys()) {
    if (key.default_value) values.set(key.name, *key.default_value, "default", false);
  }
  values.set("num_generations", kGenerations, "test.toml:1", true);
  values.set("max_completion_length", kMaxCompletion, "test.toml:1", true);
  values.set("reward_funcs", std::vector<std::string>{"accuracy"}, "test.toml:1", true);
  for (const auto& [name, value] : overrides) {
    if (schema.find(name) == nullptr) throw sdk::ConfigError("unknown test key " + name);
    values.set(name, value, "test.toml:1", true);
  }
  return values;
}

// The full-vocabulary log-softmax over one completion's positions after its
// prompt (<bos> + bytes), alone and unpadded: [n, V] float64, row k predicting
// completion[k].
inline at::Tensor completion_log_softmax(model::CausalLm& model, const std::string& prompt,
                                         const std::vector<int64_t>& completion) {
  std::vector<int64_t> tokens{tokenizer::ByteTokenizer::kBos};
  for (const unsigned char byte : prompt) tokens.push_back(byte);
  const auto prompt_length = static_cast<int64_t>(tokens.size());
  tokens.insert(tokens.end(), completion.begin(), completion.end());
  const at::Tensor input = at::tensor(std::vector<int64_t>(tokens.begin(), tokens.end() - 1), at::kLong).unsqueeze(0);
  const at::Tensor log_probs = at::log_softmax(model.logits(input)[0].to(at::kDouble), -1);  // [T-1, V]
  return log_probs.narrow(0, prompt_length - 1, static_cast<int64_t>(completion.size()));
}

// Per-token log p of one completion after its prompt. [n] float64.
inline at::Tensor reference_token_log_probs(model::CausalLm& model, const std::string& prompt,
                                            const std::vector<int64_t>& completion) {
  const at::Tensor log_probs = completion_log_softmax(model, prompt, completion);
  return log_probs.gather(1, at::tensor(completion, at::kLong).unsqueeze(1)).squeeze(1);
}

struct ReferenceSpec {
  std::string loss_type = "dapo";
  std::string scale_rewards = "group";
  double beta = 0.0;                   // KL to `reference` with kl_estimator
  std::string kl_estimator = "k3";     // k1 = −x, k2 = x²/2, k3 = eˣ − x − 1, x = log π_ref − log π
  double epsilon = 0.2;                // ε_low: the ratio is clipped below at 1 − ε
  std::optional<double> epsilon_high;  // clipped above at 1 + ε_high; unset: ε
  std::optional<double> delta;         // dual-clip: a token of A < 0 loses at most −A·δ; unset: off
  // "clip" (the two lines above), "cispo": −sg(clip(w, 1 − ε_low^IS, 1 + ε_high^IS))·A·log π,
  // "sapo": −(4/τ)·σ(τ(w − 1))·A with τ = τ_pos for A > 0, τ_neg otherwise.
  std::string policy_loss = "clip";
  double cispo_epsilon_low = 1.0;
  double cispo_epsilon_high = 0.28;
  double sapo_tau_pos = 1.0;
  double sapo_tau_neg = 1.05;
  bool mask_truncated = false;
  bool sequence_level = false;  // GSPO
  // Each reward function's scores [F][P][G] and weights; empty: one function,
  // accuracy (the completion's text equals the answer), weight 1.
  std::vector<std::vector<std::vector<double>>> function_rewards;
  std::vector<double> reward_weights;
  bool normalize_then_sum = false;    // TRL's: c = Σ_f w_f·(group-normalised r_f), A = batch-normalised c
  bool filter_zero_std = false;       // groups whose summed rewards are all equal (within 1e-12) add nothing
  double top_entropy_quantile = 1.0;  // ρ < 1: only tokens with entropy ≥ the (1 − ρ) quantile add loss
};

// Multiplies the model's lm_head by `factor`. A random tiny model is nearly
// uniform, every entropy ≈ log V, and a selection by entropy would hang on
// float rounding; a sharper head spreads them. Throws if there is no lm_head.
inline void sharpen_lm_head(model::CausalLm& model, double factor) {
  const at::NoGradGuard no_grad;
  for (auto& [name, parameter] : model.named_parameters()) {
    if (name == "lm_head.weight") {
      parameter.mul_(factor);
      return;
    }
  }
  throw sdk::ModelError("the test model has no lm_head.weight");
}

// Moves every weight of `model` by scale·sin(0.7·i + j) (element i of
// parameter j): a deterministic "update" that the tests and the dist worker
// apply alike, so that π differs from the π_old of stored rollouts.
inline void perturb_parameters(model::CausalLm& model, double scale) {
  const at::NoGradGuard no_grad;
  double j = 0.0;
  for (auto& [name, parameter] : model.named_parameters()) {
    const at::Tensor step = at::sin(at::arange(parameter.numel(), at::kDouble) * 0.7 + j) * scale;
    parameter.add_(step.to(parameter.scalar_type()).view_as(parameter));
    j += 1.0;
  }
}

// Per-token entropy −Σ_v p log p of one completion's targets after its prompt. [n] float64, no gradient.
inline at::Tensor reference_token_entropies(model::CausalLm& model, const std::string& prompt,
                                            const std::vector<int64_t>& completion) {
  const at::NoGradGuard no_grad;
  const at::Tensor log_probs = completion_log_softmax(model, prompt, completion);
  return -(log_probs.exp() * log_probs).sum(-1);
}

// The q-quantile of `values` with linear interpolation between order statistics
// (numpy's and torch.quantile's default): sorted v, position q·(n − 1).
inline double linear_quantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  const double position = q * static_cast<double>(values.size() - 1);
  const auto lower = static_cast<size_t>(std::floor(position));
  const size_t upper = std::min(lower + 1, values.size() - 1);
  return values[lower] + (position - static_cast<double>(lower)) * (values[upper] - values[lower]);
}

// Advantages from the formula: (r − group mean) / (s + 1e-4), s the group's or
// the batch's unbiased std, or r − mean. rewards: [P][G].
inline std::vector<std::vector<double>> reference_advantages(const std::vector<std::vector<double>>& rewards,
                                                             const std::string& scale) {
  double batch_sum = 0, batch_squares = 0, batch_n = 0;
  for (const auto& group : rewards) {
    for (const double r : group) {
      batch_sum += r;
      batch_squares += r * r;
      batch_n += 1;
    }
  }
  const double batch_mean = batch_sum / batch_n;
  const double batch_std = std::sqrt((batch_squares - batch_n * batch_mean * batch_mean) / (batch_n - 1));
  std::vector<std::vector<double>> advantages;
  for (const auto& group : rewards) {
    double mean = 0;
    for (const double r : group) mean += r / static_cast<double>(group.size());
    double squares = 0;
    for (const double r : group) squares += (r - mean) * (r - mean);
    const double group_std = std::sqrt(squares / static_cast<double>(group.size() - 1));
    std::vector<double> row;
    for (const double r : group) {
      const double scale_by = scale == "group" ? group_std + 1e-4 : scale == "batch" ? batch_std + 1e-4 : 1.0;
      row.push_back((r - mean) / scale_by);
    }
    advantages.push_back(row);
  }
  return advantages;
}

// TRL's multi_objective_aggregation = "normalize_then_sum" (GDPO), whatever
// scale_rewards says: per function f, within each group,
// (r_f − mean) / (unbiased std + 1e-4); c = Σ_f w_f·that; then
// A = (c − mean(c)) / (unbiased std(c) + 1e-4) over the whole global batch,
// both moments taken in two passes over the values (the plugin all-reduces
// sums). function_rewards: [F][P][G].
inline std::vector<std::vector<double>> reference_normalize_then_sum(
    const std::vector<std::vector<std::vector<double>>>& function_rewards, const std::vector<double>& weights) {
  const size_t prompts = function_rewards.front().size();
  const size_t group = function_rewards.front().front().size();
  auto mean_of = [](const std::vector<double>& values) {
    double sum = 0;
    for (const double v : values) sum += v;
    return sum / static_cast<double>(values.size());
  };
  auto std_of = [&](const std::vector<double>& values) {
    const double mean = mean_of(values);
    double squares = 0;
    for (const double v : values) squares += (v - mean) * (v - mean);
    return std::sqrt(squares / static_cast<double>(values.size() - 1));
  };
  std::vector<std::vector<double>> combined(prompts, std::vector<double>(group, 0.0));
  for (size_t f = 0; f < function_rewards.size(); ++f) {
    for (size_t p = 0; p < prompts; ++p) {
      const std::vector<double>& rewards = function_rewards[f][p];
      const double mean = mean_of(rewards);
      const double scale = std_of(rewards) + 1e-4;
      for (size_t k = 0; k < group; ++k) combined[p][k] += weights[f] * (rewards[k] - mean) / scale;
    }
  }
  std::vector<double> all;
  for (const auto& row : combined) all.insert(all.end(), row.begin(), row.end());
  const double batch_mean = mean_of(all);
  const double batch_scale = std_of(all) + 1e-4;
  for (auto& row : combined) {
    for (double& c : row) c = (c - batch_mean) / batch_scale;
  }
  return combined;
}

// One completion token of the table: its ratio π/π_old and its completion's advantage.
struct TokenRatio {
  double ratio;
  double advantage;
};

// Every completion token of `prompts` in table order, from unpadded
// forwards of `policy` and `old_policy`; advantages: [P][G].
inline std::vector<TokenRatio> reference_token_ratios(model::CausalLm& policy, model::CausalLm& old_policy,
                                                      const std::vector<Prompt>& prompts,
                                                      const std::vector<std::vector<double>>& advantages) {
  const at::NoGradGuard no_grad;
  std::vector<TokenRatio> tokens;
  for (size_t p = 0; p < prompts.size(); ++p) {
    for (size_t k = 0; k < prompts[p].completions.size(); ++k) {
      const std::vector<int64_t> ids = completion_ids(prompts[p].completions[k]);
      const at::Tensor ratio = at::exp(reference_token_log_probs(policy, prompts[p].prompt, ids) -
                                       reference_token_log_probs(old_policy, prompts[p].prompt, ids));
      for (int64_t t = 0; t < ratio.size(0); ++t) tokens.push_back({ratio[t].item<double>(), advantages[p][k]});
    }
  }
  return tokens;
}

// The step loss of the whole global batch from the formulas. `old_policy`
// null: π_old is the policy itself (detached), so the ratio is 1; it is also
// the policy whose entropies select the tokens when top_entropy_quantile < 1.
inline at::Tensor reference_step_loss(model::CausalLm& policy, model::CausalLm* old_policy, model::CausalLm* reference,
                                      const std::vector<Prompt>& prompts, const ReferenceSpec& spec) {
  std::vector<std::vector<std::vector<double>>> function_rewards = spec.function_rewards;
  std::vector<double> weights = spec.reward_weights;
  if (function_rewards.empty()) {
    std::vector<std::vector<double>> accuracy;
    for (const Prompt& prompt : prompts) {
      std::vector<double> group;
      for (const std::string& text : prompt.completions) group.push_back(text == prompt.answer ? 1.0 : 0.0);
      accuracy.push_back(group);
    }
    function_rewards = {accuracy};
    weights = {1.0};
  }
  std::vector<std::vector<double>> total(prompts.size(), std::vector<double>(prompts.front().completions.size(), 0.0));
  for (size_t f = 0; f < function_rewards.size(); ++f) {
    for (size_t p = 0; p < total.size(); ++p) {
      for (size_t k = 0; k < total[p].size(); ++k) total[p][k] += weights[f] * function_rewards[f][p][k];
    }
  }
  std::vector<std::vector<double>> advantages;
  if (spec.normalize_then_sum) {
    advantages = reference_normalize_then_sum(function_rewards, weights);
  } else {
    advantages = reference_advantages(total, spec.scale_rewards);
  }

  // Which completions are trained: not masked as truncated, not in a flat group (when filtered).
  auto trained = [&](size_t p, size_t k) {
    if (spec.mask_truncated && is_truncated(prompts[p].completions[k])) return false;
    if (spec.filter_zero_std) {
      const auto [low, high] = std::minmax_element(total[p].begin(), total[p].end());
      if (*high - *low <= 1e-12) return false;
    }
    return true;
  };
  model::CausalLm& generating = old_policy != nullptr ? *old_policy : policy;
  double entropy_threshold = -std::numeric_limits<double>::infinity();
  if (spec.top_entropy_quantile < 1.0) {
    std::vector<double> entropies;
    for (size_t p = 0; p < prompts.size(); ++p) {
      for (size_t k = 0; k < prompts[p].completions.size(); ++k) {
        if (!trained(p, k)) continue;
        const at::Tensor h =
            reference_token_entropies(generating, prompts[p].prompt, completion_ids(prompts[p].completions[k]));
        for (int64_t t = 0; t < h.size(0); ++t) entropies.push_back(h[t].item<double>());
      }
    }
    entropy_threshold = linear_quantile(entropies, 1.0 - spec.top_entropy_quantile);
  }

  at::Tensor token_sum = at::zeros({}, at::kDouble);     // Σ over all tokens
  at::Tensor seq_mean_sum = at::zeros({}, at::kDouble);  // Σ over sequences of their token mean
  int64_t tokens = 0;
  int64_t sequences = 0;
  for (size_t p = 0; p < prompts.size(); ++p) {
    for (size_t k = 0; k < prompts[p].completions.size(); ++k) {
      if (!trained(p, k)) continue;
      const std::string& text = prompts[p].completions[k];
      const std::vector<int64_t> ids = completion_ids(text);
      const at::Tensor log_probs = reference_token_log_probs(policy, prompts[p].prompt, ids);
      at::Tensor old_log_probs = log_probs.detach();
      if (old_policy != nullptr) {
        const at::NoGradGuard no_grad;
        old_log_probs = reference_token_log_probs(*old_policy, prompts[p].prompt, ids);
      }
      at::Tensor log_ratio = log_probs - old_log_probs;
      if (spec.sequence_level) log_ratio = log_ratio.mean().expand_as(log_ratio);
      const at::Tensor ratio = at::exp(log_ratio);
      const double a = advantages[p][k];
      at::Tensor loss;
      if (spec.policy_loss == "cispo") {
        const at::Tensor weight = ratio.detach().clamp(1 - spec.cispo_epsilon_low, 1 + spec.cispo_epsilon_high);
        loss = -weight * a * log_probs;
      } else if (spec.policy_loss == "sapo") {
        const double tau = a > 0 ? spec.sapo_tau_pos : spec.sapo_tau_neg;
        loss = -(4.0 / tau) * at::sigmoid(tau * (ratio - 1.0)) * a;
      } else {
        const double high = spec.epsilon_high.value_or(spec.epsilon);
        loss = -at::min(ratio * a, ratio.clamp(1 - spec.epsilon, 1 + high) * a);
        if (spec.delta && a < 0) loss = at::min(loss, at::full_like(loss, -a * *spec.delta));
      }
      if (spec.beta > 0) {
        at::Tensor ref_log_probs;
        {
          const at::NoGradGuard no_grad;
          ref_log_probs = reference_token_log_probs(*reference, prompts[p].prompt, ids);
        }
        const at::Tensor x = ref_log_probs - log_probs;
        const at::Tensor kl = spec.kl_estimator == "k1"   ? -x
                              : spec.kl_estimator == "k2" ? 0.5 * x * x
                                                          : at::exp(x) - x - 1.0;
        loss = loss + spec.beta * kl;
      }
      if (spec.top_entropy_quantile < 1.0) {
        // Unselected tokens add no loss but still count as units.
        loss = loss * (reference_token_entropies(generating, prompts[p].prompt, ids) >= entropy_threshold);
      }
      token_sum = token_sum + loss.sum();
      seq_mean_sum = seq_mean_sum + loss.mean();
      tokens += static_cast<int64_t>(ids.size());
      sequences += 1;
    }
  }
  if (spec.loss_type == "grpo") return seq_mean_sum / static_cast<double>(sequences);
  if (spec.loss_type == "dr_grpo") return token_sum / static_cast<double>(kMaxCompletion * sequences);
  return token_sum / static_cast<double>(tokens);  // dapo, bnpo
}

}  // namespace ptrain::grpo_test
