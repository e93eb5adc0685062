#include "grpo_module.h"

#include "grpo_advantages.h"
#include "grpo_dynamic_sampling.h"
#include "grpo_loss.h"
#include "grpo_rewards.h"
#include "grpo_rollouts.h"

#include "ptrain/sdk/chat.h"
#include "ptrain/sdk/errors.h"
#include "ptrain/sdk/util/example_fields.h"
#include "ptrain/sdk/util/microbatching.h"
#include "ptrain/sdk/util/reference_model.h"
#include "ptrain/sdk/util/row_metrics.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <sstream>

namespace ptrain::grpo {
namespace {

constexpr const char* kComponent = "grpo";

// With filter_zero_std_groups: groups sampled over every rank and round, the
// informative ones trained on, and the rounds run (grpo_dynamic_sampling.h).
constexpr std::array<const char*, 3> kSamplingMetrics{"groups/generated", "groups/kept", "groups/generation_rounds"};

// Per-token values of each row's completion, laid at its target positions. [B, T].
at::Tensor scatter_completion_values(const std::vector<const ScoredCompletion*>& rows,
                                     at::Tensor ScoredCompletion::*field, int64_t length, at::ScalarType type) {
  at::Tensor out = at::zeros({static_cast<int64_t>(rows.size()), length}, type);
  for (size_t i = 0; i < rows.size(); ++i) {
    const at::Tensor& values = rows[i]->*field;
    const auto start = static_cast<int64_t>(rows[i]->prompt_ids.size()) - 1;
    out[static_cast<int64_t>(i)].narrow(0, start, values.size(0)).copy_(values);
  }
  return out;
}

// Reads per-token values of each row back out of a [B, T] tensor.
void gather_completion_values(const at::Tensor& values, std::vector<ScoredCompletion*>& rows,
                              at::Tensor ScoredCompletion::*field) {
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto start = static_cast<int64_t>(rows[i]->prompt_ids.size()) - 1;
    const auto n = static_cast<int64_t>(rows[i]->completion_ids.size());
    rows[i]->*field = values[static_cast<int64_t>(i)].narrow(0, start, n).clone();
  }
}

// A weighted-mean metric over the trained tokens of a microbatch, kept in
// tensors (the core reads them after the step's last microbatch). No tokens:
// weight 0, so the value (0 then) adds nothing.
void add_token_mean(sdk::MetricList& metrics, const std::string& name, const at::Tensor& per_token,
                    const at::Tensor& mask) {
  const at::Tensor tokens = mask.sum().to(at::kDouble);
  const at::Tensor sum = (per_token.detach().to(at::kDouble) * mask).sum();
  metrics.add(name, sum / tokens.clamp_min(1.0), tokens);
}

// [n] bool: which of an episode's completion tokens the policy sampled.
at::Tensor policy_mask_tensor(const ScoredCompletion& completion) {
  return at::tensor(std::vector<uint8_t>(completion.policy_mask), at::kByte).to(at::kBool);
}

// module.environment opened through the core, its errors naming the key; null without one.
std::unique_ptr<sdk::Environment> open_environment(sdk::Context& ctx, const GrpoConfig& config) {
  if (config.environment.empty()) return nullptr;
  const std::string where = ctx.module_config().where("environment");
  if (ctx.tokenizer().chat_template() == nullptr) {
    throw sdk::ConfigError(where +
                           ": episodes render observations as chat turns, but the run's tokenizer has no "
                           "chat template; set tokenizer.chat_template");
  }
  try {
    return ctx.open_environment(config.environment);
  } catch (const sdk::ConfigError& error) {
    throw sdk::ConfigError(where + ": " + error.what());
  } catch (const sdk::PluginError& error) {
    throw sdk::PluginError(where + ": " + error.what());
  }
}

// A float64 tensor's values in row-major order, read to the host at once.
std::vector<double> host_values(const at::Tensor& tensor) {
  const at::Tensor host = tensor.to(at::kCPU, at::kDouble).contiguous();
  return {host.data_ptr<double>(), host.data_ptr<double>() + host.numel()};
}

// An episode's policy mask and turns (grpo_episodes.h), when rollout i is one.
void take_episode(const RolloutGroups& groups, size_t i, ScoredCompletion& completion) {
  if (groups.episodes.empty()) return;
  completion.policy_mask = groups.episodes[i].policy_mask;
  completion.turns = groups.episodes[i].turns;
}

// Rollout i with what every use of it shares: ids, episode mask, truncation
// and its row of the flattened [P, G, F] reward values.
ScoredCompletion completion_of(const RolloutGroups& groups, size_t i, const std::vector<double>& function_reward,
                               size_t num_functions) {
  ScoredCompletion completion;
  completion.prompt_index = groups.requests[i].prompt_index;
  completion.generation_index = groups.requests[i].generation_index;
  completion.prompt_ids = groups.requests[i].prompt_ids;
  completion.completion_ids = groups.rollouts[i].completion_ids;
  take_episode(groups, i, completion);
  completion.truncated = groups.rollouts[i].truncated();
  const auto row = function_reward.begin() + static_cast<std::ptrdiff_t>(i * num_functions);
  completion.function_rewards.assign(row, row + static_cast<std::ptrdiff_t>(num_functions));
  return completion;
}

// Each rollout with its advantage and rewards, read from the [P, G] and
// [P, G, F] tensors; in rollout order (completion k of prompt p at p·G + k).
std::vector<ScoredCompletion> scored_completions(const RolloutGroups& groups, const at::Tensor& rewards,
                                                 const Advantages& scored, const GrpoConfig& config) {
  const auto num_functions = static_cast<size_t>(rewards.size(2));
  const std::vector<double> advantage = host_values(scored.advantage);
  const std::vector<double> reward = host_values(scored.reward);
  const std::vector<double> function_reward = host_values(rewards);
  const std::vector<double> group_stds = host_values(scored.group_std);
  std::vector<ScoredCompletion> completions;
  for (size_t i = 0; i < groups.rollouts.size(); ++i) {
    ScoredCompletion completion = completion_of(groups, i, function_reward, num_functions);
    completion.advantage = advantage[i];
    completion.reward = reward[i];
    completion.group_std = group_stds[i / static_cast<size_t>(groups.num_generations)];
    completion.trained = !completion.completion_ids.empty() &&
                         !(config.mask_truncated_completions && completion.truncated) &&
                         !(config.filter_zero_std_groups && is_zero_std(completion.group_std));
    completions.push_back(std::move(completion));
  }
  return completions;
}

// Row i of a collated microbatch: the completion's trained positions in the
// loss mask, and its advantage, rewards, length and episode figures.
void fill_row(GrpoMicrobatch& batch, int64_t i, const ScoredCompletion& completion) {
  const auto n = static_cast<int64_t>(completion.completion_ids.size());
  if (completion.trained) {
    at::Tensor trained = batch.tokens.loss_mask[i].narrow(0, static_cast<int64_t>(completion.prompt_ids.size()) - 1, n);
    // An episode trains only the policy's own tokens; its observations are context.
    if (completion.policy_mask.empty()) {
      trained.fill_(true);
    } else {
      trained.copy_(policy_mask_tensor(completion));
    }
  }
  batch.advantages[i] = completion.advantage;
  batch.rewards[i] = completion.reward;
  batch.function_rewards[i].copy_(at::tensor(completion.function_rewards, at::kDouble));
  batch.group_stds[i] = completion.group_std;
  batch.lengths[i] = static_cast<double>(n);
  batch.truncated[i] = completion.truncated;
  batch.turns[i] = static_cast<double>(completion.turns);
}

}  // namespace

void GrpoModule::setup(sdk::Context& ctx) {
  config_ = read_grpo_config(ctx.module_config());
  chat_template_.reset();
  if (const sdk::ChatTemplate* chat_template = ctx.tokenizer().chat_template()) chat_template_ = *chat_template;
  tokenizer_has_bos_ = ctx.tokenizer().bos_id() >= 0;
  reward_functions_.clear();
  reward_functions_ = make_reward_functions(ctx, config_);
  environment_ = open_environment(ctx, config_);
  std::ostringstream summary;
  summary << "G = " << config_.num_generations << ", policy_loss " << policy_loss_name(config_.policy_loss)
          << ", loss_type " << loss_type_name(config_.loss_type) << ", rewards";
  for (size_t f = 0; f < config_.reward_names.size(); ++f) {
    summary << (f == 0 ? " " : " + ") << config_.reward_weights[f] << "·" << config_.reward_names[f];
  }
  if (environment_) summary << " (environment " << environment_->name() << ", max_turns " << config_.max_turns << ")";
  summary << ", num_iterations " << config_.num_iterations << ", beta " << config_.beta;
  if (config_.beta > 0.0) {
    reference_ = sdk::load_reference_model(ctx, config_.reference_model, ctx.module_config().where("reference_model"));
    summary << " (reference: " << (config_.reference_model.empty() ? "initial policy" : config_.reference_model) << ")";
  } else {
    summary << " (no reference model)";
  }
  ctx.logger().info(kComponent, summary.str());
}

std::vector<sdk::MetricSpec> GrpoModule::metric_specs() const {
  using sdk::Reduction;
  std::vector<sdk::MetricSpec> specs{{"reward", Reduction::kWeightedMean},
                                     {"reward_std", Reduction::kWeightedMean},
                                     {"frac_reward_zero_std", Reduction::kWeightedMean},
                                     {"completions/mean_length", Reduction::kWeightedMean},
                                     {"completions/min_length", Reduction::kMin},
                                     {"completions/max_length", Reduction::kMax},
                                     {"completions/clipped_ratio", Reduction::kWeightedMean},
                                     {"entropy", Reduction::kWeightedMean},
                                     {"clip_ratio/low_mean", Reduction::kWeightedMean},
                                     {"clip_ratio/high_mean", Reduction::kWeightedMean},
                                     {"clip_ratio/region_mean", Reduction::kWeightedMean}};
  for (const std::string& name : config_.reward_names) {
    specs.push_back({"rewards/" + name + "/mean", Reduction::kWeightedMean});
    specs.push_back({"rewards/" + name + "/std", Reduction::kMax});  // the same global value on every rank
  }
  if (config_.beta > 0.0) specs.push_back({"kl", Reduction::kWeightedMean});
  if (environment_) specs.push_back({"episodes/turns", Reduction::kWeightedMean});
  if (config_.filter_zero_std_groups) {
    for (const char* name : kSamplingMetrics) specs.push_back({name, Reduction::kMax});  // global values
  }
  return specs;
}

// A prompt is checked as sdk::prompt_token_ids() will use it, so that a bad one
// fails before training rather than when it is first sampled.
void GrpoModule::check_example(const sdk::Example& example) const {
  if (sdk::has_field(example, "messages")) {
    const std::vector<sdk::ChatMessage> messages = sdk::read_messages(example);
    if (messages.empty()) {
      throw sdk::DataError(example.location + ": field 'messages': empty conversation (a prompt needs a message)");
    }
    if (!chat_template_) {
      throw sdk::DataError(example.location +
                           ": field 'messages': chat prompts need a chat template, and the tokenizer names none; set "
                           "tokenizer.chat_template (chatml, llama3, plain or custom)");
    }
    chat_template_->render(messages, true, example.location);  // unknown roles fail here
  } else if (sdk::require_string(example, "prompt").empty() && !tokenizer_has_bos_) {
    throw sdk::DataError(example.location +
                         ": field 'prompt': empty, and the tokenizer has no <bos>, so no position predicts the "
                         "completion's first token");
  }
  if (std::find(config_.reward_funcs.begin(), config_.reward_funcs.end(), "accuracy") != config_.reward_funcs.end()) {
    sdk::require_string(example, config_.answer_field.c_str());
  }
}

void GrpoModule::generate_and_score(sdk::Context& ctx, const std::vector<const sdk::Example*>& examples) {
  const SampledGroups sampled = sample_groups(ctx, config_, {reward_functions_, environment_.get()}, examples);
  const RolloutGroups& groups = sampled.groups;
  const at::Tensor& rewards = sampled.rewards;  // [P, G, F]
  sampling_counts_ = {static_cast<double>(sampled.groups_generated), static_cast<double>(sampled.groups_kept),
                      static_cast<double>(sampled.rounds)};
  const AdvantageSettings settings{config_.reward_weights, config_.reward_aggregation, config_.scale_rewards};
  // The batch-level statistics, from one collective on every rank.
  at::Tensor sums = pack_reward_sums(local_reward_sums(rewards, settings));
  ctx.all_reduce_sum(sums);
  const RewardSums global = unpack_reward_sums(sums, rewards.size(2));
  function_batch_stds_ = function_batch_stds(global);
  completions_ = scored_completions(groups, rewards, compute_advantages(rewards, settings, global), config_);
}

void GrpoModule::score_without_gradients(sdk::Context& ctx, const std::vector<std::vector<int64_t>>& groups) {
  const bool needs_old = config_.num_iterations > 1 || config_.top_entropy_quantile < 1.0;
  if (!needs_old && !reference_) return;
  const at::NoGradGuard no_grad;
  for (const std::vector<int64_t>& members : groups) {
    std::unique_ptr<GrpoMicrobatch> batch = collate(members);
    // Every completion token, trained or not: the values are stored per completion.
    sdk::TokenBatch all_tokens = batch->tokens;
    std::vector<ScoredCompletion*> rows;
    for (const int64_t member : members) {
      rows.push_back(&completions_[member]);
    }
    at::Tensor completion_mask = at::zeros_like(all_tokens.loss_mask);
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto start = static_cast<int64_t>(rows[i]->prompt_ids.size()) - 1;
      completion_mask[static_cast<int64_t>(i)]
          .narrow(0, start, static_cast<int64_t>(rows[i]->completion_ids.size()))
          .fill_(true);
    }
    all_tokens.loss_mask = completion_mask;
    if (needs_old) {
      const sdk::TargetLogProbs scored = ctx.policy().target_log_probs_and_entropy(all_tokens);
      gather_completion_values(scored.log_probs.to(at::kDouble), rows, &ScoredCompletion::old_log_probs);
      if (scored.entropy.defined()) gather_completion_values(scored.entropy, rows, &ScoredCompletion::entropies);
    }
    if (reference_) {
      gather_completion_values(reference_->target_log_probs(all_tokens).log_probs.to(at::kDouble), rows,
                               &ScoredCompletion::ref_log_probs);
    }
  }
  if (config_.top_entropy_quantile < 1.0) select_high_entropy_tokens(ctx);
}

// The threshold is the (1 − ρ) quantile of the entropies of every trained
// token of the global batch, gathered from all ranks with two sums, so the
// selection does not depend on the split.
void GrpoModule::select_high_entropy_tokens(sdk::Context& ctx) {
  const sdk::RankInfo rank = ctx.rank_info();
  std::vector<at::Tensor> local;
  for (const ScoredCompletion& completion : completions_) {
    if (completion.trained) {
      if (!completion.entropies.defined()) {
        throw sdk::PluginError("grpo: top_entropy_quantile needs per-token entropies the policy model does not give");
      }
      at::Tensor entropies = completion.entropies.to(at::kDouble);
      if (!completion.policy_mask.empty()) entropies = entropies.masked_select(policy_mask_tensor(completion));
      local.push_back(entropies);
    }
  }
  const at::Tensor mine = local.empty() ? at::zeros({0}, at::kDouble) : at::cat(local);
  at::Tensor counts = at::zeros({rank.world_size}, at::kDouble);
  counts[rank.rank] = static_cast<double>(mine.size(0));
  ctx.all_reduce_sum(counts);
  const auto offset = counts.narrow(0, 0, rank.rank).sum().item<double>();
  at::Tensor all = at::zeros({static_cast<int64_t>(counts.sum().item<double>())}, at::kDouble);
  if (all.size(0) == 0) return;
  all.narrow(0, static_cast<int64_t>(offset), mine.size(0)).copy_(mine);
  ctx.all_reduce_sum(all);
  const double threshold = at::quantile(all, 1.0 - config_.top_entropy_quantile).item<double>();
  for (ScoredCompletion& completion : completions_) {
    if (completion.entropies.defined()) completion.entropy_keep = completion.entropies.to(at::kDouble) >= threshold;
  }
}

std::unique_ptr<GrpoMicrobatch> GrpoModule::collate(const std::vector<int64_t>& members) const {
  auto batch = std::make_unique<GrpoMicrobatch>();
  std::vector<const ScoredCompletion*> rows;
  std::vector<std::vector<int64_t>> inputs;
  std::vector<std::vector<int64_t>> targets;
  int64_t length = 1;
  for (const int64_t member : members) {
    const ScoredCompletion& completion = completions_[member];
    rows.push_back(&completion);
    std::vector<int64_t> sequence = completion.prompt_ids;
    sequence.insert(sequence.end(), completion.completion_ids.begin(), completion.completion_ids.end());
    if (sequence.size() < 2) sequence.push_back(sequence.back());  // a prompt with no room left: nothing is trained
    inputs.emplace_back(sequence.begin(), sequence.end() - 1);
    targets.emplace_back(sequence.begin() + 1, sequence.end());
    length = std::max(length, static_cast<int64_t>(inputs.back().size()));
    batch->num_tokens += static_cast<int64_t>(sequence.size());
  }
  const auto b = static_cast<int64_t>(members.size());
  const int64_t pad = 0;  // never a target: padded positions are outside loss_mask
  batch->tokens.input_ids = sdk::pad_sequences(inputs, pad);
  batch->tokens.target_ids = sdk::pad_sequences(targets, pad);
  batch->tokens.loss_mask = at::zeros({b, length}, at::kBool);
  batch->advantages = at::zeros({b}, at::kDouble);
  batch->rewards = at::zeros({b}, at::kDouble);
  batch->function_rewards = at::zeros({b, static_cast<int64_t>(config_.reward_names.size())}, at::kDouble);
  batch->group_stds = at::zeros({b}, at::kDouble);
  batch->lengths = at::zeros({b}, at::kDouble);
  batch->truncated = at::zeros({b}, at::kBool);
  batch->turns = at::zeros({b}, at::kDouble);
  for (int64_t i = 0; i < b; ++i) fill_row(*batch, i, *rows[i]);
  const bool scored = !rows.empty() && rows.front()->old_log_probs.defined();
  if (scored && config_.num_iterations > 1) {
    batch->old_log_probs = scatter_completion_values(rows, &ScoredCompletion::old_log_probs, length, at::kDouble);
  }
  if (!rows.empty() && rows.front()->ref_log_probs.defined()) {
    batch->ref_log_probs = scatter_completion_values(rows, &ScoredCompletion::ref_log_probs, length, at::kDouble);
  }
  if (!rows.empty() && rows.front()->entropy_keep.defined()) {
    batch->entropy_mask = scatter_completion_values(rows, &ScoredCompletion::entropy_keep, length, at::kBool);
  }
  batch->num_examples = b;
  batch->padded_tokens = b * length;
  return batch;
}

namespace {

void refuse_packing(const sdk::MicrobatchPlan& plan) {
  if (plan.packing) {
    throw sdk::ConfigError(
        "batch.packing = true: the grpo plugin does not pack rollouts (the sft plugin does); set "
        "batch.packing = false");
  }
}

// The held-out prompts' completions, one each: their reward r = Σ_f w_f r_f
// is what an evaluation reports. A lone completion has no group to compare
// with, so no advantage: its loss is the KL penalty alone (0 when beta = 0).
std::vector<ScoredCompletion> evaluated_completions(const RolloutGroups& groups, const at::Tensor& rewards,
                                                    const GrpoConfig& config) {
  const at::Tensor weights = at::tensor(config.reward_weights, at::kDouble);
  const std::vector<double> reward = host_values((rewards * weights).sum(2));  // [P, 1]
  const std::vector<double> function_reward = host_values(rewards);            // [P, 1, F]
  const size_t num_functions = config.reward_weights.size();
  std::vector<ScoredCompletion> completions;
  for (size_t i = 0; i < groups.rollouts.size(); ++i) {
    ScoredCompletion completion = completion_of(groups, i, function_reward, num_functions);
    completion.reward = reward[i];
    completion.trained =
        !completion.completion_ids.empty() && !(config.mask_truncated_completions && completion.truncated);
    completions.push_back(std::move(completion));
  }
  return completions;
}

}  // namespace

std::vector<std::unique_ptr<sdk::Microbatch>> GrpoModule::prepare(sdk::Context& ctx,
                                                                  const std::vector<const sdk::Example*>& examples,
                                                                  const sdk::MicrobatchPlan& plan) {
  refuse_packing(plan);
  const int64_t step = ctx.run_info().step;
  const int64_t cycle_start = step - step % config_.num_iterations;
  // The same decision on every rank: it depends on the step and on the
  // generation step all ranks share (a resumed run regenerates).
  const bool reuse = generated_step_ == cycle_start && step != cycle_start;
  if (!reuse && step != cycle_start) {
    ctx.logger().warn("grpo", "step " + std::to_string(step + 1) + " is in the middle of a rollout cycle " +
                                  "(num_iterations = " + std::to_string(config_.num_iterations) +
                                  ") whose rollouts this process did not generate (resumed from a checkpoint "
                                  "between cycles): generating new ones, so this run is not bit for bit the one "
                                  "it continues");
  }
  if (!reuse) {
    generate_and_score(ctx, examples);
    generated_step_ = step;
  }
  return microbatches_of_completions(ctx, plan, !reuse);
}

std::vector<std::unique_ptr<sdk::Microbatch>> GrpoModule::prepare_eval(sdk::Context& ctx,
                                                                       const std::vector<const sdk::Example*>& examples,
                                                                       const sdk::MicrobatchPlan& plan) {
  refuse_packing(plan);
  GrpoConfig eval = config_;
  eval.num_generations = 1;
  eval.sampling.temperature = config_.eval_temperature;
  const RolloutGroups groups = generate_rollouts(ctx, eval, examples, 0, environment_.get());
  const at::Tensor rewards =
      score_rollouts(ctx.tokenizer(), reward_functions_, reward_entries(config_), examples, groups);  // [P, 1, F]
  // The training rollouts stay for the steps that reuse them (num_iterations > 1).
  std::vector<ScoredCompletion> training = std::move(completions_);
  completions_ = evaluated_completions(groups, rewards, config_);
  std::vector<std::unique_ptr<sdk::Microbatch>> microbatches = microbatches_of_completions(ctx, plan, true);
  completions_ = std::move(training);
  for (const auto& microbatch : microbatches) static_cast<GrpoMicrobatch&>(*microbatch).evaluation = true;
  return microbatches;
}

std::vector<std::unique_ptr<sdk::Microbatch>> GrpoModule::microbatches_of_completions(sdk::Context& ctx,
                                                                                      const sdk::MicrobatchPlan& plan,
                                                                                      bool score) {
  std::vector<int64_t> lengths;
  for (const ScoredCompletion& completion : completions_) {
    lengths.push_back(static_cast<int64_t>(completion.prompt_ids.size() + completion.completion_ids.size()) - 1);
  }
  const std::vector<std::vector<int64_t>> groups =
      completions_.empty() ? std::vector<std::vector<int64_t>>{} : sdk::split_into_microbatches(lengths, plan);
  if (score) score_without_gradients(ctx, groups);

  std::vector<std::unique_ptr<sdk::Microbatch>> microbatches;
  for (const std::vector<int64_t>& members : groups) microbatches.push_back(collate(members));
  return microbatches;
}

std::vector<sdk::LossTerm> GrpoModule::loss_terms() const {
  return {{"policy", sdk::term_divisor(config_.aggregation)}};
}

std::vector<int64_t> GrpoModule::count_units(const sdk::Microbatch& microbatch) const {
  return {sdk::count_loss_units(static_cast<const GrpoMicrobatch&>(microbatch).tokens.loss_mask, config_.aggregation)};
}

void GrpoMicrobatch::to_device(at::Device device) {
  tokens = sdk::batch_on_device(tokens, device);
  for (at::Tensor* tensor : {&advantages, &old_log_probs, &ref_log_probs, &entropy_mask, &rewards, &function_rewards,
                             &group_stds, &lengths, &truncated, &turns}) {
    *tensor = sdk::tensor_on_device(*tensor, device);
  }
}

MicrobatchTerms GrpoModule::token_terms(sdk::Context& ctx, const GrpoMicrobatch& batch) const {
  const sdk::TargetLogProbs scored = ctx.policy().target_log_probs_and_entropy(batch.tokens);
  TokenLossInputs inputs;
  inputs.log_probs = scored.log_probs.to(at::kDouble);
  inputs.old_log_probs = batch.old_log_probs.defined() ? batch.old_log_probs : inputs.log_probs.detach();
  inputs.ref_log_probs = batch.ref_log_probs;
  inputs.advantages = batch.advantages;
  inputs.mask = batch.tokens.loss_mask;
  return {grpo_token_loss(inputs, config_), scored.entropy};
}

sdk::LossOut GrpoModule::microbatch_loss(sdk::Context& ctx, const sdk::Microbatch& microbatch) {
  const auto& batch = static_cast<const GrpoMicrobatch&>(microbatch);
  const at::Tensor& mask = batch.tokens.loss_mask;
  const MicrobatchTerms terms = token_terms(ctx, batch);
  const TokenLoss& token_loss = terms.token_loss;
  // Tokens outside the entropy selection add no loss but still count as units (as in TRL).
  const at::Tensor loss =
      batch.entropy_mask.defined() ? token_loss.loss * batch.entropy_mask.to(at::kDouble) : token_loss.loss;

  sdk::LossOut out;
  out.loss_sums = {sdk::aggregate_loss_sum(loss, mask, config_.aggregation)};
  sdk::MetricList& metrics = out.metrics;
  sdk::add_row_mean(metrics, "reward", batch.rewards);
  // An evaluation's completions are one per prompt: no group statistics.
  if (!batch.evaluation) {
    sdk::add_row_mean(metrics, "reward_std", batch.group_stds);
    sdk::add_row_mean(metrics, "frac_reward_zero_std", batch.group_stds <= kZeroStdTolerance);
  }
  for (size_t f = 0; f < config_.reward_names.size(); ++f) {
    sdk::add_row_mean(metrics, "rewards/" + config_.reward_names[f] + "/mean",
                      batch.function_rewards.select(1, static_cast<int64_t>(f)));
    if (!batch.evaluation) metrics.add("rewards/" + config_.reward_names[f] + "/std", function_batch_stds_[f]);
  }
  sdk::add_row_mean(metrics, "completions/mean_length", batch.lengths);
  metrics.add("completions/min_length", batch.lengths.min());
  metrics.add("completions/max_length", batch.lengths.max());
  sdk::add_row_mean(metrics, "completions/clipped_ratio", batch.truncated);
  if (terms.entropy.defined()) add_token_mean(metrics, "entropy", terms.entropy, mask);
  add_token_mean(metrics, "clip_ratio/low_mean", token_loss.low_clipped, mask);
  add_token_mean(metrics, "clip_ratio/high_mean", token_loss.high_clipped, mask);
  add_token_mean(metrics, "clip_ratio/region_mean", token_loss.low_clipped | token_loss.high_clipped, mask);
  if (token_loss.kl.defined()) add_token_mean(metrics, "kl", token_loss.kl, mask);
  if (environment_) sdk::add_row_mean(metrics, "episodes/turns", batch.turns);
  if (config_.filter_zero_std_groups) {
    for (size_t i = 0; i < sampling_counts_.size(); ++i) metrics.add(kSamplingMetrics[i], sampling_counts_[i]);
  }
  return out;
}

}  // namespace ptrain::grpo
