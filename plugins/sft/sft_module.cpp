#include "sft_module.h"

#include "ptrain/sdk/errors.h"
#include "ptrain/sdk/util/example_fields.h"
#include "ptrain/sdk/util/microbatching.h"
#include "ptrain/sdk/util/tokenized_dataset.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace ptrain::sft {
namespace {

// [system] user assistant (user assistant)*: anything else trains the model on
// a conversation shape it will never be prompted with.
void check_alternation(const std::vector<sdk::ChatMessage>& messages, const std::string& location) {
  const size_t first = messages.front().role == "system" ? 1 : 0;
  for (size_t i = first; i < messages.size(); ++i) {
    const char* expected = (i - first) % 2 == 0 ? "user" : "assistant";
    if (messages[i].role != expected) {
      throw sdk::DataError(location + ": field 'messages[" + std::to_string(i) + "].role': expected \"" + expected +
                           "\", got \"" + messages[i].role +
                           "\" (turns go [system,] user, assistant, user, assistant, ...)");
    }
  }
}

// A conversation ends with the assistant's turn. The built-in templates know
// system, user and assistant in alternation; the model's own template
// ("auto") decides which roles exist and in what order (docs/tokenizers.md):
// it renders them (a `tool` turn) or refuses them.
void check_conversation(const std::vector<sdk::ChatMessage>& messages, const sdk::ChatTemplate& chat_template,
                        const std::string& location) {
  if (messages.empty()) throw sdk::DataError(location + ": field 'messages': empty conversation");
  if (!chat_template.renderer) check_alternation(messages, location);
  if (messages.back().role != "assistant") {
    throw sdk::DataError(location +
                         ": field 'messages': the last message must be the assistant's (nothing to "
                         "train on after message " +
                         std::to_string(messages.size() - 1) + ")");
  }
}

// A TokenizedExample in the token cache: its two per-token arrays, then its
// scalars in one array.
enum CachedArray : size_t { kTokens, kTrainable, kScalars };
enum CachedScalar : size_t { kCompletionStart, kTruncated };

sdk::TokenArrays to_arrays(TokenizedExample example) {
  sdk::TokenArrays arrays(3);
  arrays[kTokens] = std::move(example.tokens);
  arrays[kTrainable].assign(example.trainable.begin(), example.trainable.end());
  arrays[kScalars] = {example.completion_start, example.truncated ? 1 : 0};
  return arrays;
}

TokenizedExample from_arrays(const sdk::TokenArrays& arrays) {
  TokenizedExample example;
  example.tokens = arrays.at(kTokens);
  example.trainable.assign(arrays.at(kTrainable).begin(), arrays.at(kTrainable).end());
  example.completion_start = arrays.at(kScalars).at(kCompletionStart);
  example.truncated = arrays.at(kScalars).at(kTruncated) != 0;
  return example;
}

constexpr sdk::TokenCodec<TokenizedExample> kCacheCodec{to_arrays, from_arrays};

}  // namespace

void SftModule::setup(sdk::Context& ctx) {
  config_ = read_sft_config(ctx.module_config(), ctx.run_info().max_length);
  if (const sdk::ChatTemplate* chat_template = ctx.tokenizer().chat_template()) chat_template_ = *chat_template;
  ctx.logger().info("sft", std::string("loss aggregation ") + sdk::loss_aggregation_name(config_.aggregation.mode) +
                               (chat_template_ ? ", chat template " + chat_template_->name : "") +
                               (config_.assistant_only_loss ? ", assistant-only loss on chat data" : ""));
}

std::vector<sdk::MetricSpec> SftModule::metric_specs() const {
  return {{"token_accuracy", sdk::Reduction::kWeightedMean},
          {"nll_per_token", sdk::Reduction::kWeightedMean},
          {"trainable_tokens", sdk::Reduction::kSum},
          {"truncated", sdk::Reduction::kSum},
          {"skipped_examples", sdk::Reduction::kSum}};
}

void SftModule::check_example(const sdk::Example& example) const {
  if (sdk::has_field(example, "messages")) {
    if (sdk::has_field(example, "prompt") || sdk::has_field(example, "completion")) {
      throw sdk::DataError(example.location +
                           ": field 'messages': give either {\"messages\"} or {\"prompt\", \"completion\"}, not both");
    }
    const std::vector<sdk::ChatMessage> messages = sdk::read_messages(example);
    if (!chat_template_) {
      throw sdk::DataError(example.location +
                           ": field 'messages': chat data needs a chat template, and the tokenizer names none; set "
                           "tokenizer.chat_template (chatml, llama3, plain or custom)");
    }
    chat_template_->render(messages, false, example.location);  // unknown roles fail here, before training
    check_conversation(messages, *chat_template_, example.location);
    return;
  }
  // An empty completion is a valid example: its <eos> is the one trained
  // target (docs/file-formats.md#datasets, as TRL does), teaching the model to answer nothing.
  sdk::require_string(example, "prompt");
  sdk::require_string(example, "completion");
}

TokenizedExample SftModule::tokenize(const sdk::Tokenizer& tokenizer, const sdk::Example& example,
                                     int64_t max_length) const {
  if (sdk::has_field(example, "messages")) {
    if (!chat_template_) check_example(example);  // throws the error that names the missing template
    return tokenize_chat_example(tokenizer, *chat_template_, sdk::read_messages(example), config_.assistant_only_loss,
                                 max_length, example.location);
  }
  return tokenize_example(tokenizer, sdk::require_string(example, "prompt"), sdk::require_string(example, "completion"),
                          max_length);
}

void SftModule::prepare_dataset(sdk::Context& ctx, const std::vector<sdk::Example>& examples) {
  const int64_t max_length = ctx.run_info().max_length;
  const sdk::Tokenizer& tokenizer = ctx.tokenizer();
  // Everything tokenize() reads besides the tokenizer, its template and the examples.
  const std::string recipe = "sft/1 max_length=" + std::to_string(max_length) +
                             " assistant_only_loss=" + std::to_string(config_.assistant_only_loss);
  dataset_.assign(examples, sdk::tokenize_examples<TokenizedExample>(
                                ctx, examples, recipe,
                                [&](const sdk::Example& example) { return tokenize(tokenizer, example, max_length); },
                                kCacheCodec, "sft"));
  const auto untrainable =
      std::count_if(dataset_.by_index().begin(), dataset_.by_index().end(),
                    [](const TokenizedExample& example) { return !example.has_trainable_target(); });
  if (untrainable == static_cast<int64_t>(examples.size())) {
    const std::string& first = examples.front().location;
    throw sdk::DataError(first.substr(0, first.rfind(':')) + ": none of its " + std::to_string(examples.size()) +
                         " examples has a trainable token left within data.max_length = " + std::to_string(max_length) +
                         ", so every step would be skipped; raise data.max_length or shorten what precedes the "
                         "trained text");
  }
  if (untrainable > 0) {
    ctx.logger().warn("sft",
                      std::to_string(untrainable) + " of " + std::to_string(examples.size()) +
                          " examples have no trainable token within data.max_length = " + std::to_string(max_length) +
                          ": they are left out of every step that samples them and counted in skipped_examples");
  }
}

std::vector<std::unique_ptr<sdk::Microbatch>> SftModule::prepare(sdk::Context& ctx,
                                                                 const std::vector<const sdk::Example*>& examples,
                                                                 const sdk::MicrobatchPlan& plan) {
  const sdk::Tokenizer& tokenizer = ctx.tokenizer();
  const int64_t max_length = ctx.run_info().max_length;
  std::vector<TokenizedExample> tokenized;
  std::vector<int64_t> input_lengths;
  tokenized.reserve(examples.size());
  int64_t skipped = 0;
  for (const sdk::Example* example : examples) {
    const TokenizedExample* prepared = dataset_.find(*example);
    TokenizedExample item = prepared ? *prepared : tokenize(tokenizer, *example, max_length);
    // Nothing to learn from (truncated away): left out and counted, never
    // trained on as an empty mask.
    if (!item.has_trainable_target()) {
      ++skipped;
      continue;
    }
    input_lengths.push_back(static_cast<int64_t>(item.tokens.size()) - 1);
    tokenized.push_back(std::move(item));
  }

  std::vector<std::unique_ptr<sdk::Microbatch>> microbatches;
  if (plan.packing) {
    for (const sdk::PackedMicrobatch& rows : sdk::plan_packed_microbatches(input_lengths, plan)) {
      auto microbatch = std::make_unique<SftMicrobatch>();
      std::vector<std::vector<TokenizedExample>> packed_rows;
      for (const std::vector<int64_t>& row : rows) {
        packed_rows.emplace_back();
        for (const int64_t member : row) {
          packed_rows.back().push_back(tokenized[member]);
          microbatch->num_tokens += input_lengths[member];
          microbatch->trainable_tokens += tokenized[member].trainable_targets();
          microbatch->truncated_examples += tokenized[member].truncated ? 1 : 0;
          ++microbatch->num_examples;
        }
      }
      microbatch->tokens = collate_packed_examples(packed_rows, tokenizer.pad_id());
      microbatch->padded_tokens = microbatch->tokens.input_ids.numel();
      if (microbatches.empty()) microbatch->skipped_examples = skipped;
      microbatches.push_back(std::move(microbatch));
    }
    return microbatches;
  }
  for (const std::vector<int64_t>& members : sdk::split_into_microbatches(input_lengths, plan)) {
    auto microbatch = std::make_unique<SftMicrobatch>();
    std::vector<TokenizedExample> group;
    for (const int64_t member : members) {
      group.push_back(tokenized[member]);
      microbatch->num_tokens += input_lengths[member];
      microbatch->trainable_tokens += tokenized[member].trainable_targets();
      microbatch->truncated_examples += tokenized[member].truncated ? 1 : 0;
    }
    microbatch->tokens = collate_examples(group, tokenizer.pad_id());
    microbatch->num_examples = static_cast<int64_t>(members.size());
    microbatch->padded_tokens = microbatch->tokens.input_ids.numel();
    if (microbatches.empty()) microbatch->skipped_examples = skipped;  // reported once per rank and step
    microbatches.push_back(std::move(microbatch));
  }
  return microbatches;
}

std::vector<sdk::LossTerm> SftModule::loss_terms() const { return {{"nll", sdk::term_divisor(config_.aggregation)}}; }

std::vector<int64_t> SftModule::count_units(const sdk::Microbatch& microbatch) const {
  return {sdk::count_loss_units(static_cast<const SftMicrobatch&>(microbatch).tokens, config_.aggregation)};
}

sdk::LossOut SftModule::microbatch_loss(sdk::Context& ctx, const sdk::Microbatch& microbatch) {
  const auto& batch = static_cast<const SftMicrobatch&>(microbatch);
  const sdk::TargetLogProbs scored = ctx.policy().target_log_probs(batch.tokens);
  const at::Tensor token_nll = -scored.log_probs;  // [B, T], 0 outside the mask

  sdk::LossOut out;
  out.loss_sums = {sdk::aggregate_loss_sum(token_nll, batch.tokens, config_.aggregation)};

  // Metric values stay tensors: the core reads a step's metrics after its last microbatch.
  const at::Tensor& mask = batch.tokens.loss_mask;
  const auto trainable = static_cast<double>(batch.trainable_tokens);
  if (trainable > 0) {
    const at::Tensor correct = scored.is_argmax.logical_and(mask).sum().to(at::kDouble);
    const at::Tensor nll_sum = token_nll.detach().to(at::kDouble).sum();  // 0 outside the mask
    out.metrics.add("token_accuracy", correct / trainable, trainable);
    out.metrics.add("nll_per_token", nll_sum / trainable, trainable);
  }
  out.metrics.add("trainable_tokens", trainable);
  out.metrics.add("truncated", static_cast<double>(batch.truncated_examples));
  out.metrics.add("skipped_examples", static_cast<double>(batch.skipped_examples));
  return out;
}

}  // namespace ptrain::sft
