#include "sft_module.h"

#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>

namespace ptrain::sft {

void SftModule::setup(sdk::Context& ctx) {
  config_ = read_sft_config(ctx.module_config(), ctx.run_info().max_length);
  ctx.logger().info("sft", std::string("loss aggregation ") + sdk::loss_aggregation_name(config_.aggregation.mode));
}

std::vector<sdk::MetricSpec> SftModule::metric_specs() const {
  return {{"token_accuracy", sdk::Reduction::kWeightedMean},
          {"nll_per_token", sdk::Reduction::kWeightedMean},
          {"trainable_tokens", sdk::Reduction::kSum},
          {"truncated", sdk::Reduction::kSum}};
}

void SftModule::check_example(const sdk::Example& example) const {
  if (sdk::has_field(example, "messages") && !sdk::has_field(example, "prompt")) {
    throw sdk::DataError(example.location +
                         ": field 'messages': chat-formatted SFT data needs a chat template, which the byte "
                         "tokenizer does not have; give {\"prompt\", \"completion\"} instead");
  }
  sdk::require_string(example, "prompt");
  sdk::require_string(example, "completion");
}

std::vector<std::unique_ptr<sdk::Microbatch>> SftModule::prepare(sdk::Context& ctx,
                                                                 const std::vector<const sdk::Example*>& examples,
                                                                 const sdk::MicrobatchPlan& plan) {
  const sdk::Tokenizer& tokenizer = ctx.tokenizer();
  const int64_t max_length = ctx.run_info().max_length;
  std::vector<TokenizedExample> tokenized;
  std::vector<int64_t> input_lengths;
  tokenized.reserve(examples.size());
  for (const sdk::Example* example : examples) {
    tokenized.push_back(tokenize_example(tokenizer, sdk::require_string(*example, "prompt"),
                                         sdk::require_string(*example, "completion"), max_length));
    input_lengths.push_back(static_cast<int64_t>(tokenized.back().tokens.size()) - 1);
  }

  std::vector<std::unique_ptr<sdk::Microbatch>> microbatches;
  for (const std::vector<int64_t>& members : sdk::split_into_microbatches(input_lengths, plan)) {
    auto microbatch = std::make_unique<SftMicrobatch>();
    std::vector<TokenizedExample> group;
    for (const int64_t member : members) {
      group.push_back(tokenized[member]);
      microbatch->num_tokens += input_lengths[member];
      microbatch->truncated_examples += tokenized[member].truncated ? 1 : 0;
    }
    microbatch->tokens = collate_examples(group, tokenizer.pad_id());
    microbatch->num_examples = static_cast<int64_t>(members.size());
    microbatch->padded_tokens = microbatch->tokens.input_ids.numel();
    microbatches.push_back(std::move(microbatch));
  }
  return microbatches;
}

int64_t SftModule::count_units(const sdk::Microbatch& microbatch) const {
  return sdk::count_loss_units(static_cast<const SftMicrobatch&>(microbatch).tokens.loss_mask, config_.aggregation);
}

double SftModule::loss_divisor(int64_t global_units) const {
  return sdk::loss_divisor(config_.aggregation, global_units);
}

sdk::LossOut SftModule::microbatch_loss(sdk::Context& ctx, const sdk::Microbatch& microbatch) {
  const auto& batch = static_cast<const SftMicrobatch&>(microbatch);
  const sdk::TargetLogProbs scored = ctx.policy().target_log_probs(batch.tokens);
  const at::Tensor token_nll = -scored.log_probs;  // [B, T], 0 outside the mask

  sdk::LossOut out;
  out.loss_sum = sdk::aggregate_loss_sum(token_nll, batch.tokens.loss_mask, config_.aggregation);

  const at::Tensor& mask = batch.tokens.loss_mask;
  const auto trainable = static_cast<double>(mask.sum().item<int64_t>());
  if (trainable > 0) {
    const auto correct = static_cast<double>(scored.is_argmax.logical_and(mask).sum().item<int64_t>());
    const double nll_sum = token_nll.detach().masked_select(mask).sum().item<double>();
    out.metrics.add("token_accuracy", correct / trainable, trainable);
    out.metrics.add("nll_per_token", nll_sum / trainable, trainable);
  }
  out.metrics.add("trainable_tokens", trainable);
  out.metrics.add("truncated", static_cast<double>(batch.truncated_examples));
  return out;
}

}  // namespace ptrain::sft
