// The DPO TrainModule: preference losses over pairs, one loss unit per pair
// (or per completion token), exact over any split of the global batch.
//
// Per microbatch of B pairs it reports
//   n = B                      (loss_agg = "pair")  or Σ_i (|y_c,i| + |y_r,i|)  ("token")
//   S = Σ_i u_i · w_i · Σ_j λ_j ℓ_j,i
// with u_i the unit weight (1 or the pair's tokens), w_i the WPO weight (1
// without use_weighting) and λ_j the weight of pair loss j (dpo_loss.h), so
// the step loss is Σ_j λ_j · (mean over the global batch's pairs of ℓ_j).
// as loss term "pair". The `sft` loss is a term of its own units, "nll":
//   n_nll = Σ_i |y_c,i|,  S_nll = λ_sft · Σ_i Σ_t −log π(y_c,i,t | …)
// i.e. λ_sft times the NLL per chosen token of the whole global batch.
//
// The module composes its parts: microbatches are cut and collated by
// dpo_microbatches.h, scored by dpo_scoring.h, their reference log-probs come
// from dpo_reference.h and bco_pair's δ from dpo_bco.h.
#pragma once

#include "dpo_bco.h"
#include "dpo_config.h"
#include "dpo_data.h"
#include "dpo_loss.h"
#include "dpo_microbatches.h"
#include "dpo_reference.h"
#include "dpo_scoring.h"

#include "ptrain/sdk/chat.h"
#include "ptrain/sdk/train_module.h"
#include "ptrain/sdk/util/tokenized_dataset.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ptrain::dpo {

class DpoModule final : public sdk::TrainModule {
 public:
  void setup(sdk::Context& ctx) override;
  std::vector<sdk::MetricSpec> metric_specs() const override;
  void check_example(const sdk::Example& example) const override;
  // Tokenizes every pair once, in parallel, cached in the run directory
  // (sdk/util/token_cache.h); precomputes reference log-probs if configured.
  void prepare_dataset(sdk::Context& ctx, const std::vector<sdk::Example>& examples) override;
  std::vector<std::unique_ptr<sdk::Microbatch>> prepare(sdk::Context& ctx,
                                                        const std::vector<const sdk::Example*>& examples,
                                                        const sdk::MicrobatchPlan& plan) override;
  // As prepare(), marked as held-out: their rewards stay out of bco_pair's δ.
  std::vector<std::unique_ptr<sdk::Microbatch>> prepare_eval(sdk::Context& ctx,
                                                             const std::vector<const sdk::Example*>& examples,
                                                             const sdk::MicrobatchPlan& plan) override;
  // "pair" when a pair loss is configured, "nll" with the sft loss.
  std::vector<sdk::LossTerm> loss_terms() const override;
  std::vector<int64_t> count_units(const sdk::Microbatch& microbatch) const override;
  sdk::LossOut microbatch_loss(sdk::Context& ctx, const sdk::Microbatch& microbatch) override;
  // bco_pair: folds this step's rewards of every rank into δ, so that the
  // state a checkpoint saves after the step is complete.
  void end_step(sdk::Context& ctx) override;
  // TR-DPO's synced reference weights and bco_pair's running mean.
  sdk::PluginState save_state() const override;
  void load_state(sdk::Context& ctx, const sdk::PluginState& state) override;

  const DpoConfig& config() const { return config_; }
  // The cache file precompute_reference reads and writes in this run.
  std::string reference_cache_path(const sdk::Context& ctx) const;
  // Whether a live reference model is held (false after precomputing).
  bool holds_reference_model() const { return reference_.holds_model(); }

 private:
  // One example as this run trains on it: strings or chat messages.
  TokenizedPair tokenize(const sdk::Tokenizer& tokenizer, int64_t max_length, const sdk::Example& example) const;

  DpoConfig config_;
  std::optional<sdk::ChatTemplate> chat_template_;  // the tokenizer's, copied at setup
  sdk::TokenizedDataset<TokenizedPair> dataset_;    // filled by prepare_dataset()
  LossType reward_form_ = LossType::kSigmoid;       // the log-prob form (sum or mean) rewards are reported in
  ReferenceLogProbs reference_;
  BcoRunningMean bco_;
};

}  // namespace ptrain::dpo
