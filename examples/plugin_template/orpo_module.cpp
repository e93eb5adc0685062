#include "orpo_module.h"
#include "ptrain/sdk/util/example_fields.h"
#include "ptrain/sdk/util/microbatching.h"
#include "ptrain/sdk/util/row_metrics.h"

#include <ATen/ATen.h>

namespace orpo {

namespace sdk = ptrain::sdk;

void OrpoModule::setup(sdk::Context& ctx) {
  config_ = read_orpo_config(ctx.module_config());
  ctx.logger().info("orpo", "λ = " + std::to_string(config_.lambda) + ", no reference model");
}

std::vector<sdk::MetricSpec> OrpoModule::metric_specs() const {
  // Per-pair values averaged over the step's pairs: weighted by each
  // microbatch's pair count, so the result does not depend on the split.
  return {{"nll_chosen", sdk::Reduction::kWeightedMean},     {"odds_ratio_loss", sdk::Reduction::kWeightedMean},
          {"log_odds_ratio", sdk::Reduction::kWeightedMean}, {"rewards/accuracy", sdk::Reduction::kWeightedMean},
          {"logps/chosen", sdk::Reduction::kWeightedMean},   {"logps/rejected", sdk::Reduction::kWeightedMean},
          {"truncated_pairs", sdk::Reduction::kSum}};
}

void OrpoModule::check_example(const sdk::Example& example) const {
  for (const char* field : {"prompt", "chosen", "rejected"}) sdk::require_string(example, field);
}

std::vector<std::unique_ptr<sdk::Microbatch>> OrpoModule::prepare(sdk::Context& ctx,
                                                                  const std::vector<const sdk::Example*>& examples,
                                                                  const sdk::MicrobatchPlan& plan) {
  const sdk::Tokenizer& tokenizer = ctx.tokenizer();
  std::vector<TokenizedPair> pairs;
  std::vector<int64_t> lengths;  // tokens a pair's longer side puts through the forward
  for (const sdk::Example* example : examples) {
    pairs.push_back(tokenize_pair(tokenizer, sdk::require_string(*example, "prompt"),
                                  sdk::require_string(*example, "chosen"), sdk::require_string(*example, "rejected"),
                                  ctx.run_info().max_length));
    const TokenizedPair& pair = pairs.back();
    lengths.push_back(static_cast<int64_t>(pair.prompt.size() + std::max(pair.chosen.size(), pair.rejected.size())) -
                      1);
  }
  std::vector<std::unique_ptr<sdk::Microbatch>> microbatches;
  for (const std::vector<int64_t>& members : sdk::split_into_microbatches(lengths, plan)) {
    auto microbatch = std::make_unique<OrpoMicrobatch>();
    std::vector<TokenizedPair> group;
    for (const int64_t member : members) {
      group.push_back(pairs[member]);
      microbatch->truncated_pairs += pairs[member].truncated ? 1 : 0;
      microbatch->num_tokens += static_cast<int64_t>(2 * pairs[member].prompt.size() + pairs[member].chosen.size() +
                                                     pairs[member].rejected.size()) -
                                2;
    }
    microbatch->tokens = collate_pairs(group, tokenizer.pad_id());
    microbatch->pairs = static_cast<int64_t>(members.size());
    microbatch->num_examples = microbatch->pairs;
    microbatch->padded_tokens = microbatch->tokens.input_ids.numel();
    microbatches.push_back(std::move(microbatch));
  }
  return microbatches;
}

std::vector<sdk::LossTerm> OrpoModule::loss_terms() const { return {{"pair", sdk::TermDivisor::kGlobalUnits}}; }

std::vector<int64_t> OrpoModule::count_units(const sdk::Microbatch& microbatch) const {
  return {static_cast<const OrpoMicrobatch&>(microbatch).pairs};
}

sdk::LossOut OrpoModule::microbatch_loss(sdk::Context& ctx, const sdk::Microbatch& microbatch) {
  const auto& batch = static_cast<const OrpoMicrobatch&>(microbatch);
  sdk::LossOut out;
  if (batch.pairs == 0) {
    // Where the model computes (ctx.device()), like every loss sum: never assume the CPU.
    out.loss_sums = {at::zeros({}, at::dtype(at::kDouble).device(ctx.device()))};
    return out;
  }
  const sdk::TargetLogProbs scored = ctx.policy().target_log_probs(batch.tokens);  // [2B, T], 0 off the mask
  const at::Tensor tokens = batch.tokens.loss_mask.sum(1);                         // [2B], ≥ 1 each
  const at::Tensor mean_logp = scored.log_probs.to(at::kDouble).sum(1) / tokens.to(at::kDouble);
  const at::Tensor chosen = mean_logp.slice(0, 0, batch.pairs);
  const at::Tensor rejected = mean_logp.slice(0, batch.pairs, 2 * batch.pairs);
  const PairLosses losses = orpo_losses(chosen, rejected, config_.lambda);
  out.loss_sums = {losses.loss.sum()};

  // Means over the microbatch's pairs, weighted by the pair count (split-invariant),
  // left in tensors: the core reads every metric of a step after its last microbatch.
  sdk::add_row_mean(out.metrics, "nll_chosen", losses.nll_chosen);
  sdk::add_row_mean(out.metrics, "odds_ratio_loss", losses.odds_ratio_loss);
  sdk::add_row_mean(out.metrics, "log_odds_ratio", losses.log_odds_ratio);
  sdk::add_row_mean(out.metrics, "rewards/accuracy", losses.log_odds_ratio.gt(0).to(at::kDouble));
  sdk::add_row_mean(out.metrics, "logps/chosen", chosen);
  sdk::add_row_mean(out.metrics, "logps/rejected", rejected);
  out.metrics.add("truncated_pairs", static_cast<double>(batch.truncated_pairs));
  return out;
}

}  // namespace orpo
