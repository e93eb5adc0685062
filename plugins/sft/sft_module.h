// The SFT TrainModule: completion-only negative log-likelihood.
#pragma once

#include "sft_config.h"
#include "sft_loss.h"

#include "ptrain/sdk/train_module.h"
#include "ptrain/sdk/util/tokenized_dataset.h"

#include <optional>
#include <vector>

namespace ptrain::sft {

struct SftMicrobatch final : sdk::Microbatch {
  sdk::TokenBatch tokens;
  int64_t trainable_tokens = 0;  // the loss mask's count, known on the host
  int64_t truncated_examples = 0;
  int64_t skipped_examples = 0;  // examples of the step left out: no trainable target after truncation

  void to_device(at::Device device) override { tokens = sdk::batch_on_device(tokens, device); }
};

class SftModule final : public sdk::TrainModule {
 public:
  void setup(sdk::Context& ctx) override;
  std::vector<sdk::MetricSpec> metric_specs() const override;
  void check_example(const sdk::Example& example) const override;
  // Tokenizes every example once, in parallel, cached in the run directory (sdk/util/token_cache.h).
  void prepare_dataset(sdk::Context& ctx, const std::vector<sdk::Example>& examples) override;
  std::vector<std::unique_ptr<sdk::Microbatch>> prepare(sdk::Context& ctx,
                                                        const std::vector<const sdk::Example*>& examples,
                                                        const sdk::MicrobatchPlan& plan) override;
  // One term, "nll": token NLL aggregated by loss_agg.
  std::vector<sdk::LossTerm> loss_terms() const override;
  std::vector<int64_t> count_units(const sdk::Microbatch& microbatch) const override;
  sdk::LossOut microbatch_loss(sdk::Context& ctx, const sdk::Microbatch& microbatch) override;

  const SftConfig& config() const { return config_; }

  // One example as this run trains on it: prompt/completion or chat.
  TokenizedExample tokenize(const sdk::Tokenizer& tokenizer, const sdk::Example& example, int64_t max_length) const;

 private:
  SftConfig config_;
  std::optional<sdk::ChatTemplate> chat_template_;   // the tokenizer's, copied at setup
  sdk::TokenizedDataset<TokenizedExample> dataset_;  // filled by prepare_dataset()
};

}  // namespace ptrain::sft
