// The KTO TrainModule (docs/kto.md): unpaired desirable and undesirable
// completions against a frozen reference, with the KL reference point z0 of
// each global batch (kto_loss.h, kto_scoring.h).
#pragma once

#include "kto_config.h"
#include "kto_data.h"

#include "ptrain/sdk/train_module.h"
#include "ptrain/sdk/util/tokenized_dataset.h"

#include <memory>
#include <string>
#include <vector>

namespace ptrain::kto {

struct KtoMicrobatch final : sdk::Microbatch {
  std::vector<KtoExample> examples;  // the rows, tokenized: each keeps a completion token
  sdk::TokenBatch tokens;            // their sequences
  at::Tensor desirable;              // [B] bool
  at::Tensor z0;                     // 0-dim float64: the KL reference point of the step's global batch
  int64_t desirable_examples = 0;    // counts known on the host, for metric weights
  int64_t undesirable_examples = 0;
  int64_t truncated_examples = 0;
  int64_t skipped_examples = 0;  // examples of the step with no completion token within max_length

  void to_device(at::Device device) override;
};

class KtoModule final : public sdk::TrainModule {
 public:
  // Reads [module]; loads or copies the frozen reference.
  void setup(sdk::Context& ctx) override;
  std::vector<sdk::MetricSpec> metric_specs() const override;
  void check_example(const sdk::Example& example) const override;
  // Tokenizes every example once, cached in the run directory; warns, as
  // TRL does, when the weights leave desirable and undesirable unbalanced.
  void prepare_dataset(sdk::Context& ctx, const std::vector<sdk::Example>& examples) override;
  // Collective: z0 of the step's global batch, then this rank's scorable
  // examples in microbatches, each with that z0.
  std::vector<std::unique_ptr<sdk::Microbatch>> prepare(sdk::Context& ctx,
                                                        const std::vector<const sdk::Example*>& examples,
                                                        const sdk::MicrobatchPlan& plan) override;
  // One term, "kto": a mean over the global batch's scorable examples.
  std::vector<sdk::LossTerm> loss_terms() const override;
  std::vector<int64_t> count_units(const sdk::Microbatch& microbatch) const override;
  sdk::LossOut microbatch_loss(sdk::Context& ctx, const sdk::Microbatch& microbatch) override;

  const KtoConfig& config() const { return config_; }

 private:
  // The example as prepare_dataset() tokenized it, or tokenized now (held-out examples).
  KtoExample tokenized(const sdk::Tokenizer& tokenizer, const sdk::Example& example) const;

  KtoConfig config_;
  std::unique_ptr<sdk::LanguageModel> reference_;
  sdk::TokenizedDataset<KtoExample> dataset_;  // filled by prepare_dataset()
};

// TRL's advice when desirable and undesirable examples are unequal in number
// and neither weight is in the range that balances them (λ_D·n_D / (λ_U·n_U)
// within [1, 4/3]): a sentence naming both ranges, or "" when balanced.
std::string weight_advice(int64_t desirable, int64_t undesirable, const KtoConfig& config);

}  // namespace ptrain::kto
