#include "core/train/generation_eval.h"

#include "ptrain/sdk/errors.h"

#include <ATen/core/Tensor.h>

#include <algorithm>

namespace ptrain::train {
namespace {

// Prompts whose completion each evaluation keeps as a sample (eval_samples.h).
constexpr size_t kSampledPrompts = 4;

generation::GenerationSettings settings_of(const config::RunConfig& config) {
  generation::GenerationSettings settings;
  settings.sampling.temperature = config.eval.temperature;
  settings.sampling.max_new_tokens = config.eval.max_new_tokens;
  settings.sampling.seed = config.seed;
  settings.per_prompt = config.eval.num_generations;
  settings.show_progress = false;  // every evaluation: the eval line says how long it took
  return settings;
}

sdk::BuiltinRewardSettings reward_settings(const config::RunConfig& config, const std::vector<sdk::Example>& examples) {
  const std::string key = config.source.string() + ": key 'eval.answer_field'";
  sdk::BuiltinRewardSettings settings;
  settings.answer_field = generation::resolve_answer_field(config.eval.answer_field, config.eval.rewards, examples, key);
  settings.max_completion_length = config.eval.max_new_tokens;
  settings.overlong_cache = std::max<int64_t>(1, config.eval.max_new_tokens / 4);
  return settings;
}

}  // namespace

std::vector<std::string> generation_eval_metric_names(const config::EvalSection& eval) {
  std::vector<std::string> names;
  for (const std::string& entry : eval.rewards) names.push_back("eval/" + generation::reward_name(entry));
  return names;
}

GenerationEval::GenerationEval(const config::RunConfig& config, model::CausalLm& policy,
                               const sdk::Tokenizer& tokenizer, const std::vector<sdk::Example>& examples)
    : policy_(policy),
      tokenizer_(tokenizer),
      prompts_(generation::held_out_prompts(examples)),
      settings_(settings_of(config)) {
  generation::check_prompts(tokenizer, prompts_, policy.config().max_position_embeddings);
  const std::string key = config.source.string() + ": key 'eval.rewards'";
  try {
    rewards_ = generation::make_rewards(config.eval.rewards, reward_settings(config, prompts_), key + ":");
  } catch (const sdk::PluginError& error) {
    throw sdk::PluginError(key + ": " + error.what());
  }
}

GenerationEval::Result GenerationEval::evaluate(dist::Communicator& communicator) {
  const model::CausalLm::LayersHeldWhole whole(policy_, true);
  const std::vector<generation::Completion> completions =
      generation::generate_completions(policy_, tokenizer_, prompts_, settings_, communicator);
  const at::Tensor scores =
      generation::score_completions(rewards_, completions, prompts_, tokenizer_, communicator, policy_.device());
  const std::vector<double> means = generation::reward_means(scores);
  Result result{{}, nlohmann::json::array()};
  for (size_t f = 0; f < rewards_.size(); ++f) result.metrics["eval/" + rewards_[f].name] = means[f];
  const auto table = scores.accessor<double, 2>();
  for (size_t i = 0; i < completions.size() && result.samples.size() < kSampledPrompts; ++i) {
    if (completions[i].generation != 0) continue;
    nlohmann::json scored = nlohmann::json::object();
    for (size_t f = 0; f < rewards_.size(); ++f) scored[rewards_[f].name] = table[static_cast<int64_t>(i)][f];
    result.samples.push_back({{"prompt", completions[i].prompt_text},
                              {"completion", tokenizer_.decode(completions[i].completion_ids)},
                              {"rewards", std::move(scored)}});
  }
  return result;
}

}  // namespace ptrain::train
