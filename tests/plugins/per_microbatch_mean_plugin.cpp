// A deliberately wrong plugin for the conformance harness: SFT whose "loss
// sum" is the microbatch's mean over its units — normalised per microbatch,
// the mistake the update step exists to avoid (a step's loss then depends on
// how the global batch was split). The harness must name split_invariance,
// and no_scalar_reads: counting units inside microbatch_loss reads a tensor
// back to the host once per microbatch.
#include "sft_module.h"

#include "ptrain/sdk/plugin.h"

#include <ATen/ATen.h>

namespace {

using namespace ptrain;

class PerMicrobatchMeanModule final : public sdk::TrainModule {
 public:
  void setup(sdk::Context& ctx) override { sft_.setup(ctx); }
  std::vector<sdk::MetricSpec> metric_specs() const override { return sft_.metric_specs(); }
  void check_example(const sdk::Example& example) const override { sft_.check_example(example); }
  void prepare_dataset(sdk::Context& ctx, const std::vector<sdk::Example>& examples) override {
    sft_.prepare_dataset(ctx, examples);
  }
  std::vector<std::unique_ptr<sdk::Microbatch>> prepare(sdk::Context& ctx,
                                                        const std::vector<const sdk::Example*>& examples,
                                                        const sdk::MicrobatchPlan& plan) override {
    return sft_.prepare(ctx, examples, plan);
  }
  std::vector<sdk::LossTerm> loss_terms() const override { return sft_.loss_terms(); }
  std::vector<int64_t> count_units(const sdk::Microbatch& microbatch) const override {
    return sft_.count_units(microbatch);
  }
  sdk::LossOut microbatch_loss(sdk::Context& ctx, const sdk::Microbatch& microbatch) override {
    sdk::LossOut out = sft_.microbatch_loss(ctx, microbatch);
    const int64_t units = count_units(microbatch)[0];
    if (units > 0) out.loss_sums[0] = out.loss_sums[0] / static_cast<double>(units);  // the bug
    return out;
  }

 private:
  sft::SftModule sft_;
};

sdk::TrainModule* create_module() { return new PerMicrobatchMeanModule(); }

}  // namespace

PTRAIN_DEFINE_PLUGIN("per_microbatch_mean", "0.0.1", "test fixture: SFT normalised per microbatch (wrong)",
                     ptrain::sft::declare_sft_config, create_module)
