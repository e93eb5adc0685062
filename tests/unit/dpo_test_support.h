// Helpers shared by the DPO tests: a tiny model, preference examples, a
// [module] table built from the plugin's schema, and an independent
// full-batch reference of the step loss computed from the formulas, one
// unpadded sequence at a time through model.logits + log_softmax (never
// through the plugin's collate or log-prob path). The world-size-2 test
// reuses these from its worker processes.
#pragma once

#include "catch.h"

#include "support/sft_reference.h"
#include "support/test_util.h"

#include "core/dist/communicator.h"
#include "core/dist/gradient_sync.h"
#include "core/metrics/metric_reducer.h"
#include "core/model/causal_lm.h"
#include "core/tokenizer/byte_tokenizer.h"
#include "core/train/update_step.h"
#include "dpo_config.h"
#include "ptrain/sdk/config_schema.h"
#include "ptrain/sdk/train_module.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace ptrain::dpo_test {

inline constexpr int64_t kMaxLength = 40;

struct PreferencePair {
  std::string prompt;
  std::string chosen;
  std::string rejected;
};

// Eight pairs of very different lengths; the last one exceeds kMaxLength and
// is truncated (its prompt keeps its end, its completions their start).
inline std::vector<PreferencePair> global_batch_pairs() {
  return {{"1+1=", "2", "3"},
          {"a much longer prompt about something=", "ok", "not ok at all"},
          {"q", "a long chosen completion", "short"},
          {"héllo wörld ", "ünïcode", "ascii"},
          {"3*7=", "21", "24"},
          {"x", "", "y"},
          {"medium prompt=", "medium answer", "medium answer!"},
          {std::string(30, 'p') + "end=", "the chosen one is long", "rejected"}};
}

inline std::vector<sdk::Example> to_examples(const std::vector<PreferencePair>& pairs) {
  std::vector<sdk::Example> examples;
  for (size_t i = 0; i < pairs.size(); ++i) {
    examples.push_back(
        {static_cast<int64_t>(i), "prefs.jsonl:" + std::to_string(i + 1),
         nlohmann::json{{"prompt", pairs[i].prompt}, {"chosen", pairs[i].chosen}, {"rejected", pairs[i].rejected}}});
  }
  return examples;
}

inline std::vector<const sdk::Example*> pointers_to(const std::vector<sdk::Example>& examples) {
  std::vector<const sdk::Example*> pointers;
  for (const sdk::Example& example : examples) pointers.push_back(&example);
  return pointers;
}

// [module] values: the schema's defaults, then `overrides` as if the user wrote them.
inline sdk::ConfigValues dpo_values(const std::map<std::string, sdk::ConfigValue>& overrides = {}) {
  sdk::ConfigSchema schema;
  dpo::declare_dpo_config(schema);
  sdk::ConfigValues values("module");
  for (const sdk::ConfigKey& key : schema.keys()) {
    if (key.default_value) values.set(key.name, *key.default_value, "default", false);
  }
  for (const auto& [name, value] : overrides) {
    REQUIRE(schema.find(name) != nullptr);
    values.set(name, value, "test.toml:1", true);
  }
  return values;
}

// The pair as the spec defines it: bytes, <eos> after each completion, and
// if 1 + |prompt| + longest completion > L, the prompt keeps its last
// min(|prompt|, max(Lp, L − 1 − longest)) bytes and the completions their first L − 1 − kept.
struct ReferenceSequences {
  std::vector<int64_t> prompt;  // <bos> + kept prompt bytes
  std::vector<int64_t> chosen;
  std::vector<int64_t> rejected;
};

inline ReferenceSequences reference_sequences(const PreferencePair& pair, int64_t max_length,
                                              int64_t max_prompt_length) {
  std::vector<int64_t> prompt(pair.prompt.begin(), pair.prompt.end());
  for (int64_t& id : prompt) id = static_cast<unsigned char>(id);
  ReferenceSequences out;
  for (unsigned char byte : pair.chosen) out.chosen.push_back(byte);
  out.chosen.push_back(tokenizer::ByteTokenizer::kEos);
  for (unsigned char byte : pair.rejected) out.rejected.push_back(byte);
  out.rejected.push_back(tokenizer::ByteTokenizer::kEos);
  const auto longest = static_cast<int64_t>(std::max(out.chosen.size(), out.rejected.size()));
  auto kept = static_cast<int64_t>(prompt.size());
  if (1 + kept + longest > max_length) {
    kept = std::min(kept, std::max(max_prompt_length, max_length - 1 - longest));
    const int64_t budget = max_length - 1 - kept;
    if (static_cast<int64_t>(out.chosen.size()) > budget) out.chosen.resize(budget);
    if (static_cast<int64_t>(out.rejected.size()) > budget) out.rejected.resize(budget);
  }
  out.prompt.push_back(tokenizer::ByteTokenizer::kBos);
  out.prompt.insert(out.prompt.end(), prompt.end() - kept, prompt.end());
  return out;
}

// Σ_t log p(completion_t | prefix) for one unpadded sequence. Differentiable scalar.
inline at::Tensor reference_sequence_log_prob(model::CausalLm& model, const std::vector<int64_t>& prompt,
                                              const std::vector<int64_t>& completion) {
  std::vector<int64_t> tokens(prompt);
  tokens.insert(tokens.end(), completion.begin(), completion.end());
  const at::Tensor input = at::tensor(std::vector<int64_t>(tokens.begin(), tokens.end() - 1), at::kLong).unsqueeze(0);
  const at::Tensor log_probs = at::log_softmax(model.logits(input)[0], -1);  // [T-1, V]
  at::Tensor total = at::zeros({}, at::kDouble);
  for (size_t k = 0; k < completion.size(); ++k) {
    const auto position = static_cast<int64_t>(prompt.size() + k) - 1;
    total = total + log_probs[position][completion[k]].to(at::kDouble);
  }
  return total;
}

enum class ReferenceLoss { kSigmoid, kIpo, kSimpo };

struct ReferenceSpec {
  ReferenceLoss loss = ReferenceLoss::kSigmoid;
  double beta = 0.1;
  double gamma = 0.5;
  double sft_weight = 0.0;  // > 0 adds λ · (NLL per chosen token of the whole batch)
  int64_t max_prompt_length = kMaxLength / 2;
};

// The step loss of the whole batch from the formulas (docs/dpo.md), one
// unit per pair. `reference` null: reference-free (log π_ref = 0).
inline at::Tensor reference_step_loss(model::CausalLm& policy, model::CausalLm* reference,
                                      const std::vector<PreferencePair>& pairs, const ReferenceSpec& spec) {
  at::Tensor pair_sum = at::zeros({}, at::kDouble);
  at::Tensor nll_sum = at::zeros({}, at::kDouble);
  int64_t chosen_tokens = 0;
  for (const PreferencePair& pair : pairs) {
    const ReferenceSequences seq = reference_sequences(pair, kMaxLength, spec.max_prompt_length);
    const at::Tensor pi_c = reference_sequence_log_prob(policy, seq.prompt, seq.chosen);
    const at::Tensor pi_r = reference_sequence_log_prob(policy, seq.prompt, seq.rejected);
    at::Tensor ref_c = at::zeros({}, at::kDouble);
    at::Tensor ref_r = at::zeros({}, at::kDouble);
    if (reference != nullptr) {
      const at::NoGradGuard no_grad;
      ref_c = reference_sequence_log_prob(*reference, seq.prompt, seq.chosen);
      ref_r = reference_sequence_log_prob(*reference, seq.prompt, seq.rejected);
    }
    const auto n_c = static_cast<double>(seq.chosen.size());
    const auto n_r = static_cast<double>(seq.rejected.size());
    switch (spec.loss) {
      case ReferenceLoss::kSigmoid:
        pair_sum = pair_sum - at::log_sigmoid(spec.beta * ((pi_c - ref_c) - (pi_r - ref_r)));
        break;
      case ReferenceLoss::kIpo:
        pair_sum = pair_sum + ((pi_c - ref_c) / n_c - (pi_r - ref_r) / n_r - 1.0 / (2.0 * spec.beta)).pow(2);
        break;
      case ReferenceLoss::kSimpo:
        pair_sum = pair_sum - at::log_sigmoid(spec.beta * (pi_c / n_c - pi_r / n_r) - spec.gamma);
        break;
    }
    nll_sum = nll_sum - pi_c;
    chosen_tokens += static_cast<int64_t>(seq.chosen.size());
  }
  at::Tensor loss = pair_sum / static_cast<double>(pairs.size());
  if (spec.sft_weight > 0.0) loss = loss + spec.sft_weight * nll_sum / static_cast<double>(chosen_tokens);
  return loss;
}

using testing::parameters_of;

inline void clear_gradients(const std::vector<at::Tensor>& parameters) {
  for (const at::Tensor& parameter : parameters) parameter.mutable_grad() = at::Tensor();
}

inline std::vector<at::Tensor> gradients_of(const std::vector<at::Tensor>& parameters) {
  std::vector<at::Tensor> grads;
  for (const at::Tensor& parameter : parameters) grads.push_back(parameter.grad().detach().clone());
  return grads;
}

using ::ptrain::testing::relative_error;

struct StepOutcome {
  train::GradientResult gradient;
  std::map<std::string, double> metrics;  // reduced; "core/loss" is the step loss L
  std::vector<at::Tensor> grads;
};

// One update step's gradient through the core's update step, as the trainer runs it.
inline StepOutcome run_step(sdk::TrainModule& module, sdk::Context& context,
                            const std::vector<const sdk::Example*>& rank_examples, const sdk::MicrobatchPlan& plan,
                            const std::vector<at::Tensor>& parameters, dist::Communicator& communicator) {
  metrics::MetricReducer reducer(train::step_metric_specs(module));
  dist::GradientSynchronizer grad_sync(parameters, communicator, 1 << 20);
  StepOutcome outcome;
  outcome.gradient = train::accumulate_gradients({module, "dpo", context, parameters, communicator, grad_sync},
                                                 rank_examples, plan, reducer);
  outcome.metrics = reducer.reduce(communicator);
  outcome.grads = gradients_of(parameters);
  return outcome;
}

}  // namespace ptrain::dpo_test
