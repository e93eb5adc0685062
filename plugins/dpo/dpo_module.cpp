#include "dpo_module.h"

#include "dpo_chat.h"

#include "ptrain/sdk/errors.h"
#include "ptrain/sdk/util/example_fields.h"
#include "ptrain/sdk/util/row_metrics.h"
#include "ptrain/sdk/util/tokenized_dataset.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <sstream>

namespace ptrain::dpo {
namespace {

constexpr const char* kComponent = "dpo";

// The log-prob form rewards are reported in: that of the first pair loss.
LossType reward_form_of(const DpoConfig& config) {
  for (const LossType type : config.losses) {
    if (type != LossType::kSft) return type;
  }
  return LossType::kSigmoid;
}

std::string setup_summary(const DpoConfig& config, const std::optional<sdk::ChatTemplate>& chat_template) {
  std::ostringstream summary;
  summary << "losses";
  for (size_t j = 0; j < config.losses.size(); ++j) {
    summary << (j == 0 ? " " : " + ") << config.loss_weights[j] << "·" << loss_type_name(config.losses[j]);
  }
  summary << ", beta " << config.beta << ", units per "
          << (config.loss_agg == PairAggregation::kPair ? "pair" : "token");
  if (!config.needs_reference()) {
    summary << ", no reference model";
  } else {
    summary << ", reference "
            << (config.reference_model.empty() ? "frozen copy of the initial policy" : config.reference_model);
    if (config.precompute_reference) summary << " (precomputed)";
  }
  if (chat_template) summary << ", chat template " << chat_template->name << " for message-list pairs";
  return summary.str();
}

// A TokenizedPair in the token cache (sdk/util/tokenized_dataset.h): its
// sequences, their trained masks, then its flag in an array of its own.
enum CachedArray : size_t { kPrompt, kChosen, kRejected, kChosenTrained, kRejectedTrained, kTruncated };

sdk::TokenArrays to_arrays(TokenizedPair pair) {
  sdk::TokenArrays arrays(6);
  arrays[kPrompt] = std::move(pair.prompt);
  arrays[kChosen] = std::move(pair.chosen);
  arrays[kRejected] = std::move(pair.rejected);
  arrays[kChosenTrained].assign(pair.chosen_trained.begin(), pair.chosen_trained.end());
  arrays[kRejectedTrained].assign(pair.rejected_trained.begin(), pair.rejected_trained.end());
  arrays[kTruncated] = {pair.truncated ? 1 : 0};
  return arrays;
}

TokenizedPair from_arrays(const sdk::TokenArrays& arrays) {
  TokenizedPair pair;
  pair.prompt = arrays.at(kPrompt);
  pair.chosen = arrays.at(kChosen);
  pair.rejected = arrays.at(kRejected);
  pair.chosen_trained.assign(arrays.at(kChosenTrained).begin(), arrays.at(kChosenTrained).end());
  pair.rejected_trained.assign(arrays.at(kRejectedTrained).begin(), arrays.at(kRejectedTrained).end());
  pair.truncated = arrays.at(kTruncated).at(0) != 0;
  return pair;
}

constexpr sdk::TokenCodec<TokenizedPair> kCacheCodec{to_arrays, from_arrays};

// What the pair losses read: the policy's log-probs and the reference's
// (0 without a reference). reference_parts: [B, 4] float64 or undefined.
PairLogProbs pair_log_probs(const ScoredPairs& policy, const at::Tensor& reference_parts, const PairBatch& pairs,
                            double ld_alpha) {
  const int64_t num_pairs = pairs.chosen_tokens.size(0);
  PairLogProbs logps;
  logps.policy_chosen = combine_parts(policy.chosen, ld_alpha).to(at::kDouble);
  logps.policy_rejected = combine_parts(policy.rejected, ld_alpha).to(at::kDouble);
  if (reference_parts.defined()) {
    TORCH_CHECK(reference_parts.size(0) == num_pairs, "reference parts of ", reference_parts.size(0),
                " pairs for a microbatch of ", num_pairs);
    const ScoredPairs reference = unstack_parts(reference_parts);
    logps.reference_chosen = combine_parts(reference.chosen, ld_alpha);
    logps.reference_rejected = combine_parts(reference.rejected, ld_alpha);
  } else {
    logps.reference_chosen = at::zeros({num_pairs}, logps.policy_chosen.options());
    logps.reference_rejected = at::zeros_like(logps.reference_chosen);
  }
  logps.chosen_tokens = pairs.chosen_tokens.to(at::kDouble);
  logps.rejected_tokens = pairs.rejected_tokens.to(at::kDouble);
  return logps;
}

// Σ_j λ_j ℓ_j,i per pair, [B] float64, over the pair losses; with several
// losses, each one's mean goes to `metrics` as loss/<type>.
at::Tensor weighted_pair_losses(const DpoConfig& config, const ScoredPairs& scored, const PairLogProbs& logps,
                                const PairBatch& pairs, double bco_delta, sdk::MetricList& metrics) {
  const LossParams params = loss_params(config, bco_delta);
  const bool report_components = config.losses.size() > 1;
  at::Tensor per_pair = at::zeros({pairs.chosen_tokens.size(0)}, logps.chosen_tokens.options());
  for (size_t j = 0; j < config.losses.size(); ++j) {
    const LossType type = config.losses[j];
    if (type == LossType::kSft) continue;
    const at::Tensor loss = pair_loss(type, logps, params);  // [B]
    if (report_components) sdk::add_row_mean(metrics, std::string("loss/") + loss_type_name(type), loss.detach());
    per_pair = per_pair + config.loss_weights[j] * loss;
  }
  return per_pair;
}

// The sft loss's term: λ_sft times the chosen completions' NLL sum; with
// several losses, the NLL per chosen token goes to `metrics` as loss/sft.
at::Tensor weighted_nll_sum(const DpoConfig& config, const ScoredPairs& scored, const PairBatch& pairs,
                            sdk::MetricList& metrics) {
  const size_t j = std::find(config.losses.begin(), config.losses.end(), LossType::kSft) - config.losses.begin();
  const at::Tensor nll_sum = -(scored.chosen.shared + scored.chosen.rest).to(at::kDouble).sum();
  if (config.losses.size() > 1) {
    const at::Tensor tokens = pairs.chosen_tokens.sum().to(at::kDouble);
    metrics.add("loss/sft", nll_sum / tokens.clamp_min(1.0), tokens);
  }
  return config.loss_weights[j] * nll_sum;
}

bool has_pair_loss(const DpoConfig& config) {
  return std::any_of(config.losses.begin(), config.losses.end(), [](LossType type) { return type != LossType::kSft; });
}

// WPO's weight of each pair under the current policy, [B] float64.
at::Tensor wpo_weights(sdk::LanguageModel& policy, const PairBatch& pairs) {
  const int64_t num_pairs = pairs.chosen_tokens.size(0);
  std::vector<at::Tensor> row_means;
  {
    const at::NoGradGuard no_grad;  // the weights take no gradient; the loss they scale does
    for (const sdk::TokenBatch& forward : pairs.forwards) {
      row_means.push_back(
          wpo_adjusted_log_prob_means(policy.logits(forward.input_ids), forward.target_ids, forward.loss_mask));
    }
  }
  const at::Tensor means = at::cat(row_means);  // [2B]: chosen rows, then rejected rows
  return wpo_pair_weights(means.narrow(0, 0, num_pairs), means.narrow(0, num_pairs, num_pairs));
}

void add_reward_metrics(sdk::MetricList& metrics, const PairRewards& rewards, const PairLogProbs& logps) {
  sdk::add_row_mean(metrics, "rewards/chosen", rewards.chosen);
  sdk::add_row_mean(metrics, "rewards/rejected", rewards.rejected);
  sdk::add_row_mean(metrics, "rewards/margins", rewards.chosen - rewards.rejected);
  sdk::add_row_mean(metrics, "rewards/accuracy", (rewards.chosen > rewards.rejected).to(at::kDouble));
  sdk::add_row_mean(metrics, "logps/chosen", logps.policy_chosen.detach());
  sdk::add_row_mean(metrics, "logps/rejected", logps.policy_rejected.detach());
}

}  // namespace

void DpoModule::setup(sdk::Context& ctx) {
  config_ = read_dpo_config(ctx.module_config(), ctx.run_info().max_length);
  if (const sdk::ChatTemplate* chat_template = ctx.tokenizer().chat_template()) chat_template_ = *chat_template;
  reward_form_ = reward_form_of(config_);
  ctx.logger().info(kComponent, setup_summary(config_, chat_template_));
  reference_.setup(ctx, config_);
}

std::vector<sdk::MetricSpec> DpoModule::metric_specs() const {
  std::vector<sdk::MetricSpec> specs{
      {"rewards/chosen", sdk::Reduction::kWeightedMean},  {"rewards/rejected", sdk::Reduction::kWeightedMean},
      {"rewards/margins", sdk::Reduction::kWeightedMean}, {"rewards/accuracy", sdk::Reduction::kWeightedMean},
      {"logps/chosen", sdk::Reduction::kWeightedMean},    {"logps/rejected", sdk::Reduction::kWeightedMean},
      {"truncated_pairs", sdk::Reduction::kSum}};
  if (config_.losses.size() > 1) {
    for (const LossType type : config_.losses) {
      specs.push_back({std::string("loss/") + loss_type_name(type), sdk::Reduction::kWeightedMean});
    }
  }
  if (config_.use_weighting) specs.push_back({"wpo/weight", sdk::Reduction::kWeightedMean});
  if (config_.has_loss(LossType::kBcoPair)) specs.push_back({"bco/delta", sdk::Reduction::kMax});
  return specs;
}

void DpoModule::check_example(const sdk::Example& example) const {
  if (sdk::has_field(example, "messages")) {
    throw sdk::DataError(example.location +
                         ": field 'messages': DPO data is {\"prompt\", \"chosen\", \"rejected\"}; for chat data give "
                         "chosen and rejected (and the prompt) as message lists (docs/dpo.md)");
  }
  if (is_chat_pair(example)) {
    const ChatPair pair = read_chat_pair(example, chat_template_ ? &*chat_template_ : nullptr);
    if (!chat_template_) {
      throw sdk::DataError(example.location +
                           ": field 'chosen': chat data needs a chat template, and the tokenizer names none; set "
                           "tokenizer.chat_template (chatml, llama3, plain or custom)");
    }
    check_chat_pair_renders(*chat_template_, pair, example.location);
    return;
  }
  sdk::require_string(example, "prompt");
  sdk::require_string(example, "chosen");
  sdk::require_string(example, "rejected");
}

TokenizedPair DpoModule::tokenize(const sdk::Tokenizer& tokenizer, int64_t max_length,
                                  const sdk::Example& example) const {
  TokenizedPair pair;
  if (is_chat_pair(example)) {
    if (!chat_template_) check_example(example);  // throws the error that names the missing template
    pair = tokenize_chat_pair(tokenizer, *chat_template_, read_chat_pair(example, &*chat_template_), max_length,
                              config_.max_prompt_length, example.location);
  } else {
    pair = tokenize_pair(tokenizer, sdk::require_string(example, "prompt"), sdk::require_string(example, "chosen"),
                         sdk::require_string(example, "rejected"), max_length, config_.max_prompt_length);
  }
  if (pair.prompt.empty()) {
    throw sdk::DataError(example.location +
                         ": field 'prompt': empty, and the tokenizer has no <bos>, so no position predicts the "
                         "answers' first token");
  }
  return pair;
}

std::string DpoModule::reference_cache_path(const sdk::Context& ctx) const {
  if (!config_.reference_cache.empty()) return config_.reference_cache;
  const std::string& dir = ctx.run_info().output_dir;
  return dir.empty() ? "reference_logps.json" : dir + "/reference_logps.json";
}

void DpoModule::prepare_dataset(sdk::Context& ctx, const std::vector<sdk::Example>& examples) {
  const int64_t max_length = ctx.run_info().max_length;
  const sdk::Tokenizer& tokenizer = ctx.tokenizer();
  // Everything tokenize() reads besides the tokenizer, its template and the examples.
  const std::string recipe = "dpo/1 max_length=" + std::to_string(max_length) +
                             " max_prompt_length=" + std::to_string(config_.max_prompt_length);
  std::vector<TokenizedPair> pairs = sdk::tokenize_examples<TokenizedPair>(
      ctx, examples, recipe, [&](const sdk::Example& example) { return tokenize(tokenizer, max_length, example); },
      kCacheCodec, kComponent, "pairs");
  const auto truncated =
      std::count_if(pairs.begin(), pairs.end(), [](const TokenizedPair& pair) { return pair.truncated; });
  if (truncated > 0) {
    ctx.logger().warn(kComponent, std::to_string(truncated) + " of " + std::to_string(pairs.size()) +
                                      " pairs exceed data.max_length = " + std::to_string(max_length) +
                                      " and are truncated (prompt keeps its end, completions their start; "
                                      "metric truncated_pairs)");
  }
  if (config_.precompute_reference) {
    if (config_.needs_reference()) {
      reference_.precompute(ctx, examples, pairs, reference_cache_path(ctx));
    } else {
      ctx.logger().info(kComponent, "precompute_reference: no loss of this run uses a reference; nothing to compute");
    }
  }
  dataset_.assign(examples, std::move(pairs));
}

std::vector<std::unique_ptr<sdk::Microbatch>> DpoModule::prepare(sdk::Context& ctx,
                                                                 const std::vector<const sdk::Example*>& examples,
                                                                 const sdk::MicrobatchPlan& plan) {
  if (plan.packing && config_.use_weighting) {
    throw sdk::ConfigError(
        "batch.packing = true with [module] use_weighting = true: WPO's weights read each sequence's full logits "
        "row, which packed rows do not give; set one of them to false");
  }
  reference_.begin_step(ctx);

  std::vector<TokenizedPair> pairs;
  pairs.reserve(examples.size());
  for (const sdk::Example* example : examples) {
    const TokenizedPair* prepared = dataset_.find(*example);
    pairs.push_back(prepared ? *prepared : tokenize(ctx.tokenizer(), ctx.run_info().max_length, *example));
  }

  std::vector<std::unique_ptr<sdk::Microbatch>> microbatches;
  for (const PairGroup& group : plan_pair_microbatches(pairs, plan)) {
    std::unique_ptr<DpoMicrobatch> microbatch =
        collate_pair_group(pairs, group, ctx.tokenizer().pad_id(), config_.concatenated);
    std::vector<const sdk::Example*> members;
    for (const int64_t member : group.members) members.push_back(examples[member]);
    microbatch->reference_parts = reference_.parts_of(microbatch->pairs, members);
    microbatches.push_back(std::move(microbatch));
  }
  return microbatches;
}

std::vector<std::unique_ptr<sdk::Microbatch>> DpoModule::prepare_eval(sdk::Context& ctx,
                                                                     const std::vector<const sdk::Example*>& examples,
                                                                     const sdk::MicrobatchPlan& plan) {
  std::vector<std::unique_ptr<sdk::Microbatch>> microbatches = prepare(ctx, examples, plan);
  for (const auto& microbatch : microbatches) static_cast<DpoMicrobatch&>(*microbatch).evaluation = true;
  return microbatches;
}

std::vector<sdk::LossTerm> DpoModule::loss_terms() const {
  std::vector<sdk::LossTerm> terms;
  if (has_pair_loss(config_)) terms.push_back({"pair", sdk::TermDivisor::kGlobalUnits});
  if (config_.has_loss(LossType::kSft)) terms.push_back({"nll", sdk::TermDivisor::kGlobalUnits});
  return terms;
}

std::vector<int64_t> DpoModule::count_units(const sdk::Microbatch& microbatch) const {
  const PairBatch& pairs = static_cast<const DpoMicrobatch&>(microbatch).pairs;
  std::vector<int64_t> units;
  if (has_pair_loss(config_)) {
    units.push_back(config_.loss_agg == PairAggregation::kPair
                        ? pairs.chosen_tokens.size(0)
                        : (pairs.chosen_tokens + pairs.rejected_tokens).sum().item<int64_t>());
  }
  if (config_.has_loss(LossType::kSft)) units.push_back(pairs.chosen_tokens.sum().item<int64_t>());
  return units;
}

sdk::LossOut DpoModule::microbatch_loss(sdk::Context& ctx, const sdk::Microbatch& microbatch) {
  const auto& batch = static_cast<const DpoMicrobatch&>(microbatch);
  const PairBatch& pairs = batch.pairs;
  const int64_t num_pairs = pairs.chosen_tokens.size(0);
  const ScoredPairs scored = score_pairs(ctx.policy(), pairs);
  const PairLogProbs logps = pair_log_probs(scored, batch.reference_parts, pairs, config_.ld_alpha);

  sdk::LossOut out;
  if (has_pair_loss(config_)) {
    at::Tensor per_pair = weighted_pair_losses(config_, scored, logps, pairs, bco_.delta(), out.metrics);
    if (config_.use_weighting) {
      const at::Tensor weights = wpo_weights(ctx.policy(), pairs);
      per_pair = per_pair * weights;
      sdk::add_row_mean(out.metrics, "wpo/weight", weights);
    }
    const at::Tensor unit_weights = config_.loss_agg == PairAggregation::kPair
                                        ? at::ones({num_pairs}, logps.chosen_tokens.options())
                                        : logps.chosen_tokens + logps.rejected_tokens;
    out.loss_sums.push_back((per_pair * unit_weights).sum());
  }
  if (config_.has_loss(LossType::kSft)) out.loss_sums.push_back(weighted_nll_sum(config_, scored, pairs, out.metrics));

  add_reward_metrics(out.metrics, pair_rewards(reward_form_, logps, config_.beta), logps);
  out.metrics.add("truncated_pairs", static_cast<double>(batch.truncated_pairs));
  if (config_.has_loss(LossType::kBcoPair) && !batch.evaluation) {
    out.metrics.add("bco/delta", bco_.delta());
    // The sum form of the rewards is what bco_pair shifts by δ.
    const PairRewards sum_rewards = pair_rewards(LossType::kBcoPair, logps, config_.beta);
    bco_.add((sum_rewards.chosen.sum() + sum_rewards.rejected.sum()).detach(), 2.0 * static_cast<double>(num_pairs));
  }
  return out;
}

void DpoModule::end_step(sdk::Context& ctx) {
  if (config_.has_loss(LossType::kBcoPair)) bco_.end_step(ctx);
}

sdk::PluginState DpoModule::save_state() const {
  sdk::PluginState state;
  state.meta = {{"format", 1},
                {"last_synced_step", reference_.last_synced_step()},
                {"bco_global_sum", bco_.global_sum()},
                {"bco_global_count", bco_.global_count()}};
  state.tensors = reference_.synced_weights();
  return state;
}

void DpoModule::load_state(sdk::Context& ctx, const sdk::PluginState& state) {
  if (state.meta.empty()) return;  // a checkpoint of a run that kept no DPO state
  if (state.meta.value("format", 0) != 1) {
    throw sdk::PluginError("dpo: unknown plugin state format " + state.meta.value("format", nlohmann::json()).dump());
  }
  const auto last_synced_step = state.meta.at("last_synced_step").get<int64_t>();
  const auto bco_global_sum = state.meta.at("bco_global_sum").get<double>();
  const auto bco_global_count = state.meta.at("bco_global_count").get<double>();
  bco_.restore(bco_global_sum, bco_global_count);
  reference_.restore_sync(ctx, last_synced_step, state.tensors);
}

}  // namespace ptrain::dpo
