// The ORPO TrainModule: one loss term, "pair", with one unit per preference
// pair (orpo_loss.h):
//   n = pairs in the microbatch          (known before the forward)
//   S = Σ_i (L_SFT,i + λ · L_OR,i)       (a sum over those pairs)
// so the step loss is the mean over the global batch's pairs.
#pragma once

#include "orpo_config.h"
#include "orpo_loss.h"

#include "ptrain/sdk/train_module.h"

#include <vector>

namespace orpo {

struct OrpoMicrobatch final : ptrain::sdk::Microbatch {
  ptrain::sdk::TokenBatch tokens;  // [2B, T]: chosen rows, then rejected rows
  int64_t pairs = 0;
  int64_t truncated_pairs = 0;
};

class OrpoModule final : public ptrain::sdk::TrainModule {
 public:
  void setup(ptrain::sdk::Context& ctx) override;
  std::vector<ptrain::sdk::MetricSpec> metric_specs() const override;
  void check_example(const ptrain::sdk::Example& example) const override;
  std::vector<std::unique_ptr<ptrain::sdk::Microbatch>> prepare(
      ptrain::sdk::Context& ctx, const std::vector<const ptrain::sdk::Example*>& examples,
      const ptrain::sdk::MicrobatchPlan& plan) override;
  std::vector<ptrain::sdk::LossTerm> loss_terms() const override;
  std::vector<int64_t> count_units(const ptrain::sdk::Microbatch& microbatch) const override;
  ptrain::sdk::LossOut microbatch_loss(ptrain::sdk::Context& ctx, const ptrain::sdk::Microbatch& microbatch) override;

 private:
  OrpoConfig config_;
};

}  // namespace orpo
