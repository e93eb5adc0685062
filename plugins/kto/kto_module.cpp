#include "kto_module.h"

#include "kto_loss.h"
#include "kto_scoring.h"

#include "ptrain/sdk/errors.h"
#include "ptrain/sdk/util/microbatching.h"
#include "ptrain/sdk/util/reference_model.h"
#include "ptrain/sdk/util/tokenized_dataset.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <cstdio>

namespace ptrain::kto {
namespace {

constexpr const char* kComponent = "kto";

double round2(double value) { return std::round(value * 100.0) / 100.0; }

std::string format_range(double low, double high) {
  char text[64];
  std::snprintf(text, sizeof text, "[%g, %g]", low, high);
  return text;
}

// Σ over the rows where `rows` ([B] bool) holds of `values` ([B]), as a
// weighted_mean metric over `count` rows; nothing for none.
void add_mean_over(sdk::MetricList& metrics, const std::string& name, const at::Tensor& values, const at::Tensor& rows,
                   int64_t count) {
  if (count == 0) return;
  const auto weight = static_cast<double>(count);
  metrics.add(name, values.detach().masked_fill(rows.logical_not(), 0.0).sum() / weight, weight);
}

// A KtoExample in the token cache (sdk/util/tokenized_dataset.h): its two
// sequences, then its label in an array of its own.
enum CachedArray : size_t { kPrompt, kCompletion, kDesirable };

sdk::TokenArrays to_arrays(KtoExample example) {
  sdk::TokenArrays arrays(3);
  arrays[kPrompt] = std::move(example.prompt);
  arrays[kCompletion] = std::move(example.completion);
  arrays[kDesirable] = {example.desirable ? 1 : 0};
  return arrays;
}

KtoExample from_arrays(const sdk::TokenArrays& arrays) {
  return {arrays.at(kPrompt), arrays.at(kCompletion), arrays.at(kDesirable).at(0) != 0};
}

constexpr sdk::TokenCodec<KtoExample> kCacheCodec{to_arrays, from_arrays};

}  // namespace

void KtoMicrobatch::to_device(at::Device device) {
  tokens = sdk::batch_on_device(tokens, device);
  desirable = sdk::tensor_on_device(desirable, device);
  z0 = sdk::tensor_on_device(z0, device);
}

std::string weight_advice(int64_t desirable, int64_t undesirable, const KtoConfig& config) {
  // TRL's KTOTrainer: counts of at least 1, the ranges rounded to 2 decimals.
  const auto n_desirable = static_cast<double>(std::max<int64_t>(desirable, 1));
  const auto n_undesirable = static_cast<double>(std::max<int64_t>(undesirable, 1));
  if (n_desirable == n_undesirable) return "";
  const double desirable_low = round2(n_undesirable * config.undesirable_weight / n_desirable);
  const double desirable_high = round2(n_undesirable * config.undesirable_weight / n_desirable * 1.33);
  const double undesirable_low = round2(n_desirable * config.desirable_weight / n_undesirable / 1.33);
  const double undesirable_high = round2(n_desirable * config.desirable_weight / n_undesirable);
  const bool desirable_ok = desirable_low <= config.desirable_weight && config.desirable_weight <= desirable_high;
  const bool undesirable_ok =
      undesirable_low <= config.undesirable_weight && config.undesirable_weight <= undesirable_high;
  if (desirable_ok || undesirable_ok) return "";
  return std::to_string(desirable) + " desirable and " + std::to_string(undesirable) +
         " undesirable examples, and the weights do not balance them; set desirable_weight in " +
         format_range(desirable_low, desirable_high) + " or undesirable_weight in " +
         format_range(undesirable_low, undesirable_high) + " (not both)";
}

void KtoModule::setup(sdk::Context& ctx) {
  config_ = read_kto_config(ctx.module_config());
  reference_ = sdk::load_reference_model(ctx, config_.reference_model, ctx.module_config().where("reference_model"));
  char summary[160];
  std::snprintf(summary, sizeof summary, "beta %g, desirable_weight %g, undesirable_weight %g", config_.beta,
                config_.desirable_weight, config_.undesirable_weight);
  ctx.logger().info(
      kComponent,
      std::string("loss ") +
          (config_.uses_reference_point() ? "kto (z0 over each global batch)" : "apo_zero_unpaired") + ", " + summary +
          ", reference " +
          (config_.reference_model.empty() ? "frozen copy of the initial policy" : config_.reference_model));
}

std::vector<sdk::MetricSpec> KtoModule::metric_specs() const {
  return {{"kl", sdk::Reduction::kWeightedMean},
          {"rewards/chosen", sdk::Reduction::kWeightedMean},
          {"rewards/rejected", sdk::Reduction::kWeightedMean},
          {"logps/chosen", sdk::Reduction::kWeightedMean},
          {"logps/rejected", sdk::Reduction::kWeightedMean},
          {"desirable", sdk::Reduction::kSum},
          {"undesirable", sdk::Reduction::kSum},
          {"truncated", sdk::Reduction::kSum},
          {"skipped_examples", sdk::Reduction::kSum}};
}

void KtoModule::check_example(const sdk::Example& example) const { check_kto_example(example); }

KtoExample KtoModule::tokenized(const sdk::Tokenizer& tokenizer, const sdk::Example& example) const {
  const KtoExample* prepared = dataset_.find(example);
  return prepared ? *prepared : tokenize_kto_example(tokenizer, example);
}

void KtoModule::prepare_dataset(sdk::Context& ctx, const std::vector<sdk::Example>& examples) {
  const sdk::Tokenizer& tokenizer = ctx.tokenizer();
  dataset_.assign(examples, sdk::tokenize_examples<KtoExample>(
                                ctx, examples, "kto/1",
                                [&](const sdk::Example& example) { return tokenize_kto_example(tokenizer, example); },
                                kCacheCodec, kComponent));
  int64_t desirable = 0;
  int64_t unscorable = 0;
  const int64_t max_length = ctx.run_info().max_length;
  for (const KtoExample& example : dataset_.by_index()) {
    desirable += example.desirable ? 1 : 0;
    unscorable += example.scorable(max_length) ? 0 : 1;
  }
  const auto undesirable = static_cast<int64_t>(examples.size()) - desirable;
  ctx.logger().info(kComponent, std::to_string(desirable) + " desirable and " + std::to_string(undesirable) +
                                    " undesirable examples");
  const std::string advice = weight_advice(desirable, undesirable, config_);
  if (!advice.empty()) ctx.logger().warn(kComponent, advice);
  if (unscorable > 0) {
    ctx.logger().warn(kComponent,
                      std::to_string(unscorable) + " of " + std::to_string(examples.size()) +
                          " examples have no completion token within data.max_length = " + std::to_string(max_length) +
                          ": they take no part in any step's loss or KL pairs (skipped_examples)");
  }
}

std::vector<std::unique_ptr<sdk::Microbatch>> KtoModule::prepare(sdk::Context& ctx,
                                                                 const std::vector<const sdk::Example*>& examples,
                                                                 const sdk::MicrobatchPlan& plan) {
  if (plan.packing) {
    throw sdk::ConfigError("batch.packing = true: the kto plugin does not pack sequences; set batch.packing = false");
  }
  const sdk::GlobalBatch& batch = ctx.global_batch();
  if (batch.rank_positions.size() != examples.size()) {
    throw sdk::PluginError("kto: prepare got " + std::to_string(examples.size()) + " examples, ctx.global_batch() " +
                           std::to_string(batch.rank_positions.size()) + " for this rank");
  }
  const int64_t max_length = ctx.run_info().max_length;
  // Every example of the batch: a KL pair may take another rank's completion.
  std::vector<KtoExample> batch_examples;
  for (const sdk::Example* example : batch.examples) batch_examples.push_back(tokenized(ctx.tokenizer(), *example));
  std::vector<const KtoExample*> pointers;
  for (const KtoExample& example : batch_examples) pointers.push_back(&example);
  const at::Tensor z0 = config_.uses_reference_point()
                            ? global_reference_point(ctx, *reference_, pointers, batch.rank_positions, plan, max_length)
                            : at::zeros({}, at::dtype(at::kDouble).device(ctx.device()));

  std::vector<const KtoExample*> scorable;
  std::vector<int64_t> lengths;
  int64_t skipped = 0;
  for (const int64_t position : batch.rank_positions) {
    const KtoExample& example = batch_examples.at(static_cast<size_t>(position));
    if (!example.scorable(max_length)) {
      ++skipped;
      continue;
    }
    scorable.push_back(&example);
    lengths.push_back(input_length({&example.prompt, &example.completion}, max_length));
  }
  std::vector<std::unique_ptr<sdk::Microbatch>> microbatches;
  for (const std::vector<int64_t>& members : sdk::split_into_microbatches(lengths, plan)) {
    auto microbatch = std::make_unique<KtoMicrobatch>();
    std::vector<PromptCompletion> sequences;
    std::vector<uint8_t> desirable;
    for (const int64_t member : members) {
      const KtoExample& example = *scorable[member];
      microbatch->examples.push_back(example);
      sequences.push_back({&example.prompt, &example.completion});
      desirable.push_back(example.desirable ? 1 : 0);
      microbatch->desirable_examples += example.desirable ? 1 : 0;
      microbatch->truncated_examples += example.truncated(max_length) ? 1 : 0;
      microbatch->num_tokens += lengths[member];
    }
    microbatch->num_examples = static_cast<int64_t>(members.size());
    microbatch->undesirable_examples = microbatch->num_examples - microbatch->desirable_examples;
    microbatch->tokens = collate_sequences(sequences, max_length, ctx.tokenizer().pad_id());
    microbatch->padded_tokens = microbatch->tokens.input_ids.numel();
    microbatch->desirable = at::tensor(desirable, at::kByte).to(at::kBool);
    microbatch->z0 = z0;
    if (microbatches.empty()) microbatch->skipped_examples = skipped;  // reported once per rank and step
    microbatches.push_back(std::move(microbatch));
  }
  return microbatches;
}

std::vector<sdk::LossTerm> KtoModule::loss_terms() const { return {{"kto", sdk::TermDivisor::kGlobalUnits}}; }

std::vector<int64_t> KtoModule::count_units(const sdk::Microbatch& microbatch) const {
  return {static_cast<const KtoMicrobatch&>(microbatch).num_examples};
}

sdk::LossOut KtoModule::microbatch_loss(sdk::Context& ctx, const sdk::Microbatch& microbatch) {
  const auto& batch = static_cast<const KtoMicrobatch&>(microbatch);  // ≥ 1 scorable example
  sdk::LossOut out;
  const at::Tensor policy_logps = completion_log_probs(ctx.policy(), batch.tokens);
  at::Tensor reference_logps;
  {
    const at::NoGradGuard no_grad;
    reference_logps = completion_log_probs(*reference_, batch.tokens);
    ctx.add_forward_tokens(batch.num_tokens, reference_->num_parameters());
  }
  const KtoLosses losses = kto_losses(policy_logps, reference_logps, batch.desirable, batch.z0, config_);
  out.loss_sums = {losses.losses.sum()};

  const auto examples = static_cast<double>(batch.num_examples);
  out.metrics.add("kl", batch.z0, examples);
  const at::Tensor undesirable = batch.desirable.logical_not();
  add_mean_over(out.metrics, "rewards/chosen", losses.rewards, batch.desirable, batch.desirable_examples);
  add_mean_over(out.metrics, "rewards/rejected", losses.rewards, undesirable, batch.undesirable_examples);
  add_mean_over(out.metrics, "logps/chosen", policy_logps, batch.desirable, batch.desirable_examples);
  add_mean_over(out.metrics, "logps/rejected", policy_logps, undesirable, batch.undesirable_examples);
  out.metrics.add("desirable", static_cast<double>(batch.desirable_examples));
  out.metrics.add("undesirable", static_cast<double>(batch.undesirable_examples));
  out.metrics.add("truncated", static_cast<double>(batch.truncated_examples));
  out.metrics.add("skipped_examples", static_cast<double>(batch.skipped_examples));
  return out;
}

}  // namespace ptrain::kto
