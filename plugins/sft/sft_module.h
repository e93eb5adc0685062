// The SFT TrainModule: completion-only negative log-likelihood.
#pragma once

#include "sft_config.h"
#include "sft_loss.h"

#include "ptrain/sdk/train_module.h"

namespace ptrain::sft {

struct SftMicrobatch final : sdk::Microbatch {
  sdk::TokenBatch tokens;
  int64_t truncated_examples = 0;
};

class SftModule final : public sdk::TrainModule {
 public:
  void setup(sdk::Context& ctx) override;
  std::vector<sdk::MetricSpec> metric_specs() const override;
  void check_example(const sdk::Example& example) const override;
  std::vector<std::unique_ptr<sdk::Microbatch>> prepare(sdk::Context& ctx,
                                                        const std::vector<const sdk::Example*>& examples,
                                                        const sdk::MicrobatchPlan& plan) override;
  int64_t count_units(const sdk::Microbatch& microbatch) const override;
  double loss_divisor(int64_t global_units) const override;
  sdk::LossOut microbatch_loss(sdk::Context& ctx, const sdk::Microbatch& microbatch) override;

  const SftConfig& config() const { return config_; }

 private:
  SftConfig config_;
};

}  // namespace ptrain::sft
