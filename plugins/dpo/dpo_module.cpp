#include "dpo_module.h"

#include "dpo_chat.h"
#include "dpo_reference_cache.h"

#include "ptrain/sdk/errors.h"
#include "ptrain/sdk/reference_model.h"
#include "ptrain/sdk/token_cache.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>  // at::NoGradGuard: <ATen/ATen.h> no longer includes it in LibTorch 2.6

#include <iterator>
#include <limits>
#include <sstream>

namespace ptrain::dpo {
namespace {

constexpr const char* kComponent = "dpo";
constexpr const char* kReferencePrefix = "reference/";  // TR-DPO's reference weights in the plugin state

// Reads a ReferenceColumn pair as one side's parts. parts: [B, 4] float64.
SequenceLogProbParts cached_side(const at::Tensor& parts, int64_t shared_column, int64_t rest_column) {
  return {parts.select(1, shared_column), parts.select(1, rest_column)};
}

at::Tensor reference_parts_of(sdk::LanguageModel& model, const PairBatch& batch) {
  const at::NoGradGuard no_grad;
  const ScoredPairs scored = score_pairs(model, batch);
  return at::stack({scored.chosen.shared, scored.chosen.rest, scored.rejected.shared, scored.rejected.rest}, 1)
      .to(at::kDouble);  // [B, 4]
}

}  // namespace

ScoredPairs score_pairs(sdk::LanguageModel& model, const PairBatch& batch) {
  const int64_t num_pairs = batch.chosen_tokens.size(0);
  TORCH_CHECK(
      batch.forwards.size() == batch.shared_masks.size() && (batch.forwards.size() == 1 || batch.forwards.size() == 2),
      "a pair batch has one (concatenated) or two forwards, got ", batch.forwards.size());
  ScoredPairs scored;
  if (batch.forwards.size() == 1) {
    const sdk::TokenBatch& forward = batch.forwards[0];
    // One sequence per row (2B rows), or packed rows holding 2B sequences.
    TORCH_CHECK(batch.sequence_ids.defined() || forward.input_ids.size(0) == 2 * num_pairs,
                "a concatenated forward of ", num_pairs, " pairs must have ", 2 * num_pairs, " rows, got ",
                forward.input_ids.size(0));
    const at::Tensor log_probs = model.target_log_probs(forward).log_probs;  // [R, T]
    const SequenceLogProbParts parts = sequence_log_prob_parts(log_probs, forward.loss_mask, batch.shared_masks[0],
                                                               batch.sequence_ids, 2 * num_pairs);
    scored.chosen = {parts.shared.narrow(0, 0, num_pairs), parts.rest.narrow(0, 0, num_pairs)};
    scored.rejected = {parts.shared.narrow(0, num_pairs, num_pairs), parts.rest.narrow(0, num_pairs, num_pairs)};
    return scored;
  }
  for (size_t side = 0; side < 2; ++side) {
    const sdk::TokenBatch& forward = batch.forwards[side];
    TORCH_CHECK(forward.input_ids.size(0) == num_pairs, "a separate forward of ", num_pairs, " pairs must have ",
                num_pairs, " rows, got ", forward.input_ids.size(0));
    const at::Tensor log_probs = model.target_log_probs(forward).log_probs;  // [B, T]
    (side == 0 ? scored.chosen : scored.rejected) =
        sequence_log_prob_parts(log_probs, forward.loss_mask, batch.shared_masks[side]);
  }
  return scored;
}

void DpoModule::setup(sdk::Context& ctx) {
  config_ = read_dpo_config(ctx.module_config(), ctx.run_info().max_length);
  if (const sdk::ChatTemplate* chat_template = ctx.tokenizer().chat_template()) chat_template_ = *chat_template;
  for (const LossType type : config_.losses) {
    if (type != LossType::kSft) {
      reward_form_ = type;
      break;
    }
  }
  std::ostringstream summary;
  summary << "losses";
  for (size_t j = 0; j < config_.losses.size(); ++j) {
    summary << (j == 0 ? " " : " + ") << config_.loss_weights[j] << "·" << loss_type_name(config_.losses[j]);
  }
  summary << ", beta " << config_.beta << ", units per "
          << (config_.loss_agg == PairAggregation::kPair ? "pair" : "token");
  if (!config_.needs_reference()) {
    summary << ", no reference model";
  } else {
    summary << ", reference "
            << (config_.reference_model.empty() ? "frozen copy of the initial policy" : config_.reference_model);
    if (config_.precompute_reference) summary << " (precomputed)";
  }
  if (chat_template_) summary << ", chat template " << chat_template_->name << " for message-list pairs";
  ctx.logger().info(kComponent, summary.str());

  // A precomputed reference is loaded only for the precomputation (prepare_dataset).
  if (config_.needs_reference() && !config_.precompute_reference) {
    reference_ = sdk::load_reference_model(ctx, config_.reference_model, ctx.module_config().where("reference_model"));
  }
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
    const ChatPair pair = read_chat_pair(example);
    if (!chat_template_) {
      throw sdk::DataError(example.location +
                           ": field 'chosen': chat data needs a chat template, and the tokenizer names none; set "
                           "tokenizer.chat_template (chatml, llama3, plain or custom)");
    }
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
    pair = tokenize_chat_pair(tokenizer, *chat_template_, read_chat_pair(example), max_length,
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
  const auto as_ids = [](const std::vector<uint8_t>& mask) { return std::vector<int64_t>(mask.begin(), mask.end()); };
  sdk::TokenizeStats stats;
  const std::vector<sdk::TokenArrays> arrays = sdk::tokenize_dataset(
      ctx, examples, recipe,
      [&](const sdk::Example& example) {
        TokenizedPair pair = tokenize(tokenizer, max_length, example);
        return sdk::TokenArrays{std::move(pair.prompt),      std::move(pair.chosen),        std::move(pair.rejected),
                                as_ids(pair.chosen_trained), as_ids(pair.rejected_trained), {pair.truncated ? 1 : 0}};
      },
      &stats);

  std::vector<TokenizedPair> pairs(examples.size());
  int64_t truncated = 0;
  for (size_t i = 0; i < examples.size(); ++i) {
    TokenizedPair& pair = pairs[i];
    pair.prompt = arrays[i][0];
    pair.chosen = arrays[i][1];
    pair.rejected = arrays[i][2];
    pair.chosen_trained.assign(arrays[i][3].begin(), arrays[i][3].end());
    pair.rejected_trained.assign(arrays[i][4].begin(), arrays[i][4].end());
    pair.truncated = arrays[i][5][0] != 0;
    truncated += pair.truncated ? 1 : 0;
  }
  ctx.logger().info(
      kComponent,
      std::string(stats.from_cache ? "loaded " : "tokenized ") + std::to_string(stats.examples) + " pairs" +
          (stats.cache_file.empty() ? "" : (stats.from_cache ? " from " : ", cached in ") + stats.cache_file));
  if (truncated > 0) {
    ctx.logger().warn(kComponent, std::to_string(truncated) + " of " + std::to_string(pairs.size()) +
                                      " pairs exceed data.max_length = " + std::to_string(max_length) +
                                      " and are truncated (prompt keeps its end, completions their start; "
                                      "metric truncated_pairs)");
  }
  if (config_.precompute_reference) {
    if (config_.needs_reference()) {
      precompute_reference(ctx, examples, pairs);
    } else {
      ctx.logger().info(kComponent, "precompute_reference: no loss of this run uses a reference; nothing to compute");
    }
  }
  dataset_.assign(examples.size(), TokenizedPair{});
  for (size_t i = 0; i < examples.size(); ++i) {
    dataset_.at(static_cast<size_t>(examples[i].index)) = std::move(pairs[i]);
  }
}

void DpoModule::precompute_reference(sdk::Context& ctx, const std::vector<sdk::Example>& examples,
                                     const std::vector<TokenizedPair>& pairs) {
  const sdk::RankInfo rank = ctx.rank_info();
  const std::string path = reference_cache_path(ctx);
  // The initial policy is the default reference; nothing has trained it yet.
  std::unique_ptr<sdk::LanguageModel> loaded;
  if (!config_.reference_model.empty()) loaded = ctx.load_frozen_model(config_.reference_model);
  sdk::LanguageModel& model = loaded ? *loaded : ctx.policy();
  const ReferenceFingerprint fingerprint = fingerprint_of(model, pairs);
  const auto num_pairs = static_cast<int64_t>(pairs.size());

  // Rank 0 reads the cache; its verdict and values reach every rank through
  // the same two collectives whatever it finds.
  std::optional<ReferenceCache> cached;
  std::string mismatch;
  at::Tensor verdict = at::zeros({2}, at::kDouble);  // [usable, refused]
  if (rank.rank == 0) {
    cached = read_reference_cache(path);
    if (cached) mismatch = reference_cache_mismatch(cached->fingerprint, fingerprint);
    verdict[0] = cached && mismatch.empty() ? 1.0 : 0.0;
    verdict[1] = cached && !mismatch.empty() ? 1.0 : 0.0;
  }
  ctx.all_reduce_sum(verdict);
  if (verdict[1].item<double>() > 0.0) {
    if (rank.rank == 0) {
      throw sdk::Error(path + ": refusing the DPO reference log-prob cache: " + mismatch +
                       ". Delete the file to recompute it, or set module.reference_cache to another path");
    }
    throw sdk::Error(path + ": rank 0 refused the DPO reference log-prob cache (see its log)");
  }
  const bool usable = verdict[0].item<double>() > 0.0;

  at::Tensor values = at::zeros({num_pairs, kReferenceColumns}, at::kDouble);
  if (usable) {
    if (rank.rank == 0) values.copy_(cached->values);
  } else {
    // Rank r scores pairs r, r + R, r + 2R, ... in microbatches without gradients.
    std::vector<int64_t> shard;
    for (int64_t i = rank.rank; i < num_pairs; i += rank.world_size) shard.push_back(i);
    const std::unique_ptr<sdk::Progress> progress =
        ctx.start_progress("dpo: reference log-probs (this rank's pairs)", static_cast<int64_t>(shard.size()));
    for (size_t begin = 0; begin < shard.size(); begin += static_cast<size_t>(config_.reference_micro_size)) {
      const size_t end = std::min(shard.size(), begin + static_cast<size_t>(config_.reference_micro_size));
      std::vector<TokenizedPair> group;
      for (size_t k = begin; k < end; ++k) group.push_back(pairs[shard[k]]);
      const at::Tensor parts = reference_parts_of(model, collate_pairs(group, ctx.tokenizer().pad_id(), true));
      for (size_t k = begin; k < end; ++k) values[shard[k]].copy_(parts[static_cast<int64_t>(k - begin)]);
      progress->advance(static_cast<int64_t>(end - begin));
    }
    progress->finish();
  }
  ctx.all_reduce_sum(values);
  if (!usable && rank.rank == 0) write_reference_cache(path, {fingerprint, values});

  cached_reference_ = values;
  cached_row_of_.clear();
  for (int64_t row = 0; row < num_pairs; ++row) cached_row_of_[examples[row].index] = row;
  reference_precomputed_ = true;
  reference_.reset();  // nothing keeps a reference model from here on
  ctx.logger().info(kComponent, std::string(usable ? "reused" : "computed") + " reference log-probs of " +
                                    std::to_string(num_pairs) + " pairs (" + path + ")");
}

void DpoModule::sync_reference_if_due(sdk::Context& ctx) {
  const int64_t step = ctx.run_info().step;
  // TR-DPO syncs after every sync_reference_steps-th update, i.e. before step k·τ (0-based) runs.
  if (!config_.sync_reference || step == 0 || step % config_.sync_reference_steps != 0 || step == last_synced_step_) {
    return;
  }
  reference_->soft_update_from(ctx.policy(), config_.sync_reference_alpha);
  last_synced_step_ = step;
  ctx.logger().info(kComponent, "step " + std::to_string(step + 1) + ": reference ← " +
                                    std::to_string(config_.sync_reference_alpha) + "·policy + (1 − α)·reference");
}

void DpoModule::end_step(sdk::Context& ctx) {
  if (!config_.has_loss(LossType::kBcoPair)) return;
  const double reward_sum = bco_reward_sum_.defined() ? bco_reward_sum_.item<double>() : 0.0;
  at::Tensor totals = at::tensor({reward_sum, bco_reward_count_}, at::kDouble);
  ctx.all_reduce_sum(totals);
  bco_global_sum_ += totals[0].item<double>();
  bco_global_count_ += totals[1].item<double>();
  bco_reward_sum_ = at::Tensor();
  bco_reward_count_ = 0.0;
  bco_delta_ = bco_global_count_ > 0.0 ? bco_global_sum_ / bco_global_count_ : 0.0;
}

sdk::PluginState DpoModule::save_state() const {
  sdk::PluginState state;
  state.meta = {{"format", 1},
                {"last_synced_step", last_synced_step_},
                {"bco_global_sum", bco_global_sum_},
                {"bco_global_count", bco_global_count_}};
  // Only a synced reference differs from what setup() builds again.
  if (config_.sync_reference && reference_ && last_synced_step_ >= 0) {
    for (const auto& [name, tensor] : reference_->named_parameters()) {
      state.tensors.emplace_back(kReferencePrefix + name, tensor);
    }
  }
  return state;
}

void DpoModule::load_state(sdk::Context& ctx, const sdk::PluginState& state) {
  if (state.meta.empty()) return;  // a checkpoint of a run that kept no DPO state
  if (state.meta.value("format", 0) != 1) {
    throw sdk::PluginError("dpo: unknown plugin state format " + state.meta.value("format", nlohmann::json()).dump());
  }
  last_synced_step_ = state.meta.at("last_synced_step").get<int64_t>();
  bco_global_sum_ = state.meta.at("bco_global_sum").get<double>();
  bco_global_count_ = state.meta.at("bco_global_count").get<double>();
  bco_delta_ = bco_global_count_ > 0.0 ? bco_global_sum_ / bco_global_count_ : 0.0;
  if (!config_.sync_reference || !reference_ || last_synced_step_ < 0) return;
  std::unordered_map<std::string, at::Tensor> saved;
  for (const auto& [name, tensor] : state.tensors) saved[name] = tensor;
  const at::NoGradGuard no_grad;
  for (const auto& [name, tensor] : reference_->named_parameters()) {
    const auto it = saved.find(kReferencePrefix + name);
    if (it == saved.end() || !it->second.sizes().equals(tensor.sizes())) {
      throw sdk::PluginError("dpo: the checkpoint's plugin state lacks the synced reference weight '" +
                             std::string(kReferencePrefix) + name + "' of shape " + c10::str(tensor.sizes()) +
                             "; it was not saved by a TR-DPO run of this model");
    }
    tensor.copy_(it->second);
  }
  ctx.logger().info(kComponent,
                    "resumed the TR-DPO reference as synced at step " + std::to_string(last_synced_step_ + 1));
}

std::vector<std::unique_ptr<sdk::Microbatch>> DpoModule::prepare(sdk::Context& ctx,
                                                                 const std::vector<const sdk::Example*>& examples,
                                                                 const sdk::MicrobatchPlan& plan) {
  if (plan.packing && config_.use_weighting) {
    throw sdk::ConfigError(
        "batch.packing = true with [module] use_weighting = true: WPO's weights read each sequence's full logits "
        "row, which packed rows do not give; set one of them to false");
  }
  sync_reference_if_due(ctx);
  if (config_.precompute_reference && config_.needs_reference() && !reference_precomputed_) {
    throw sdk::Error("dpo: precompute_reference is set but prepare_dataset() did not run before the first step");
  }

  std::vector<TokenizedPair> pairs;
  pairs.reserve(examples.size());
  for (const sdk::Example* example : examples) {
    const bool prepared = example->index >= 0 && static_cast<size_t>(example->index) < dataset_.size();
    pairs.push_back(prepared ? dataset_[example->index]
                             : tokenize(ctx.tokenizer(), ctx.run_info().max_length, *example));
  }

  // A microbatch of the pairs at `members` (positions in `pairs`); `rows`
  // (packing) lists the sequences of each packed row, chosen of members[k]
  // as k and its rejected as |members| + k.
  auto make_microbatch = [&](const std::vector<int64_t>& members, const std::vector<std::vector<int64_t>>* rows) {
    auto microbatch = std::make_unique<DpoMicrobatch>();
    std::vector<TokenizedPair> group;
    std::vector<int64_t> cached_rows;
    for (const int64_t member : members) {
      const TokenizedPair& pair = pairs[member];
      group.push_back(pair);
      microbatch->truncated_pairs += pair.truncated ? 1 : 0;
      microbatch->num_tokens += pair_packed_length(pair);
      if (reference_precomputed_) {
        const auto it = cached_row_of_.find(examples[member]->index);
        if (it == cached_row_of_.end()) {
          throw sdk::Error(examples[member]->location + ": no precomputed reference log-probs for this example");
        }
        cached_rows.push_back(it->second);
      }
    }
    microbatch->pairs = rows != nullptr ? collate_packed_pairs(group, *rows, ctx.tokenizer().pad_id())
                                        : collate_pairs(group, ctx.tokenizer().pad_id(), config_.concatenated);
    microbatch->num_examples = static_cast<int64_t>(members.size());
    for (const sdk::TokenBatch& forward : microbatch->pairs.forwards) {
      microbatch->padded_tokens += forward.input_ids.numel();
    }
    if (reference_precomputed_) {
      microbatch->reference_parts = cached_reference_.index_select(0, at::tensor(cached_rows, at::kLong));
    } else if (reference_) {
      microbatch->reference_parts = reference_parts_of(*reference_, microbatch->pairs);
    }
    return microbatch;
  };

  std::vector<std::unique_ptr<sdk::Microbatch>> microbatches;
  if (plan.packing) {
    // Which pairs share a microbatch: the pairs themselves are packed, both
    // sides counted, into rows of 2 × max_length under micro_tokens. Then the
    // microbatch's sequences are packed again into rows of max_length, so no
    // row is longer than an unpacked one would be (attention costs T² per row).
    sdk::MicrobatchPlan pair_plan = plan;
    pair_plan.row_tokens = 2 * plan.row_tokens;
    sdk::MicrobatchPlan row_plan = plan;
    row_plan.micro_tokens = std::numeric_limits<int64_t>::max();
    std::vector<int64_t> packed_lengths;
    for (const TokenizedPair& pair : pairs) packed_lengths.push_back(pair_packed_length(pair));
    for (const sdk::PackedMicrobatch& pair_rows : sdk::plan_packed_microbatches(packed_lengths, pair_plan)) {
      std::vector<int64_t> members;
      for (const std::vector<int64_t>& row : pair_rows) members.insert(members.end(), row.begin(), row.end());
      const auto count = static_cast<int64_t>(members.size());
      std::vector<int64_t> sequence_lengths(2 * count);
      for (int64_t k = 0; k < count; ++k) {
        sequence_lengths[k] = sequence_input_length(pairs[members[k]], false);
        sequence_lengths[count + k] = sequence_input_length(pairs[members[k]], true);
      }
      std::vector<std::vector<int64_t>> rows;
      for (sdk::PackedMicrobatch& part : sdk::plan_packed_microbatches(sequence_lengths, row_plan)) {
        std::move(part.begin(), part.end(), std::back_inserter(rows));
      }
      microbatches.push_back(make_microbatch(members, &rows));
    }
    return microbatches;
  }
  // Both sides are forwarded, so a token budget bounds 2 × the longer side.
  std::vector<int64_t> lengths;
  for (const TokenizedPair& pair : pairs) lengths.push_back(2 * pair_input_length(pair));
  for (const std::vector<int64_t>& members : sdk::split_into_microbatches(lengths, plan)) {
    microbatches.push_back(make_microbatch(members, nullptr));
  }
  return microbatches;
}

int64_t DpoModule::count_units(const sdk::Microbatch& microbatch) const {
  const auto& batch = static_cast<const DpoMicrobatch&>(microbatch);
  if (config_.loss_agg == PairAggregation::kPair) return batch.pairs.chosen_tokens.size(0);
  return (batch.pairs.chosen_tokens + batch.pairs.rejected_tokens).sum().item<int64_t>();
}

size_t DpoModule::num_extra_loss_terms() const { return config_.has_loss(LossType::kSft) ? 1 : 0; }

std::vector<int64_t> DpoModule::count_extra_units(const sdk::Microbatch& microbatch) const {
  if (!config_.has_loss(LossType::kSft)) return {};
  return {static_cast<const DpoMicrobatch&>(microbatch).pairs.chosen_tokens.sum().item<int64_t>()};
}

sdk::LossOut DpoModule::microbatch_loss(sdk::Context& ctx, const sdk::Microbatch& microbatch) {
  const auto& batch = static_cast<const DpoMicrobatch&>(microbatch);
  const PairBatch& pairs = batch.pairs;
  const int64_t num_pairs = pairs.chosen_tokens.size(0);
  const ScoredPairs scored = score_pairs(ctx.policy(), pairs);

  PairLogProbs logps;
  logps.policy_chosen = combine_parts(scored.chosen, config_.ld_alpha).to(at::kDouble);
  logps.policy_rejected = combine_parts(scored.rejected, config_.ld_alpha).to(at::kDouble);
  if (batch.reference_parts.defined()) {
    TORCH_CHECK(batch.reference_parts.size(0) == num_pairs, "reference parts of ", batch.reference_parts.size(0),
                " pairs for a microbatch of ", num_pairs);
    logps.reference_chosen =
        combine_parts(cached_side(batch.reference_parts, kChosenShared, kChosenRest), config_.ld_alpha);
    logps.reference_rejected =
        combine_parts(cached_side(batch.reference_parts, kRejectedShared, kRejectedRest), config_.ld_alpha);
  } else {
    logps.reference_chosen = at::zeros({num_pairs}, at::kDouble);
    logps.reference_rejected = at::zeros({num_pairs}, at::kDouble);
  }
  logps.chosen_tokens = pairs.chosen_tokens.to(at::kDouble);
  logps.rejected_tokens = pairs.rejected_tokens.to(at::kDouble);

  LossParams params;
  params.beta = config_.beta;
  params.label_smoothing = config_.label_smoothing;
  params.gamma = config_.gamma;
  params.discopop_tau = config_.discopop_tau;
  params.bco_delta = bco_delta_;

  sdk::LossOut out;
  const bool report_components = config_.losses.size() > 1;
  at::Tensor per_pair = at::zeros({num_pairs}, at::kDouble);  // Σ_j λ_j ℓ_j,i
  for (size_t j = 0; j < config_.losses.size(); ++j) {
    const LossType type = config_.losses[j];
    if (type == LossType::kSft) {
      const at::Tensor nll_sum = -(scored.chosen.shared + scored.chosen.rest).to(at::kDouble).sum();
      out.extra_loss_sums.push_back(config_.loss_weights[j] * nll_sum);
      if (report_components) {
        const at::Tensor tokens = pairs.chosen_tokens.sum().to(at::kDouble);
        out.metrics.add("loss/sft", nll_sum / tokens.clamp_min(1.0), tokens);
      }
      continue;
    }
    const at::Tensor loss = pair_loss(type, logps, params);  // [B]
    if (report_components) sdk::add_row_mean(out.metrics, std::string("loss/") + loss_type_name(type), loss.detach());
    per_pair = per_pair + config_.loss_weights[j] * loss;
  }

  if (config_.use_weighting) {
    std::vector<at::Tensor> row_means;
    {
      const at::NoGradGuard no_grad;  // the weights take no gradient; the loss they scale does
      for (const sdk::TokenBatch& forward : pairs.forwards) {
        row_means.push_back(
            wpo_adjusted_log_prob_means(ctx.policy().logits(forward.input_ids), forward.target_ids, forward.loss_mask));
      }
    }
    const at::Tensor means = at::cat(row_means);  // [2B]: chosen rows, then rejected rows
    const at::Tensor weights = wpo_pair_weights(means.narrow(0, 0, num_pairs), means.narrow(0, num_pairs, num_pairs));
    per_pair = per_pair * weights;
    sdk::add_row_mean(out.metrics, "wpo/weight", weights);
  }

  const at::Tensor unit_weights = config_.loss_agg == PairAggregation::kPair
                                      ? at::ones({num_pairs}, at::kDouble)
                                      : logps.chosen_tokens + logps.rejected_tokens;
  out.loss_sum = (per_pair * unit_weights).sum();

  const PairRewards rewards = pair_rewards(reward_form_, logps, config_.beta);
  sdk::add_row_mean(out.metrics, "rewards/chosen", rewards.chosen);
  sdk::add_row_mean(out.metrics, "rewards/rejected", rewards.rejected);
  sdk::add_row_mean(out.metrics, "rewards/margins", rewards.chosen - rewards.rejected);
  sdk::add_row_mean(out.metrics, "rewards/accuracy", (rewards.chosen > rewards.rejected).to(at::kDouble));
  sdk::add_row_mean(out.metrics, "logps/chosen", logps.policy_chosen.detach());
  sdk::add_row_mean(out.metrics, "logps/rejected", logps.policy_rejected.detach());
  out.metrics.add("truncated_pairs", static_cast<double>(batch.truncated_pairs));
  if (config_.has_loss(LossType::kBcoPair)) {
    out.metrics.add("bco/delta", bco_delta_);
    // The sum form of the rewards is what bco_pair shifts by δ.
    const PairRewards sum_rewards = pair_rewards(LossType::kBcoPair, logps, config_.beta);
    // Kept as a tensor until end_step: a read here would wait for the microbatch on a GPU.
    const at::Tensor reward_sum = (sum_rewards.chosen.sum() + sum_rewards.rejected.sum()).detach();
    bco_reward_sum_ = bco_reward_sum_.defined() ? bco_reward_sum_ + reward_sum : reward_sum;
    bco_reward_count_ += 2.0 * static_cast<double>(num_pairs);
  }
  return out;
}

}  // namespace ptrain::dpo
