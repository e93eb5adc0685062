// A deliberately wrong KTO for the conformance harness: the KL reference
// point z0 estimated per microbatch from the microbatch's own examples (each
// paired with the previous one's completion within the microbatch), as TRL's
// KTOTrainer does under gradient accumulation. z0 is a statistic of the
// whole batch, so this makes the step depend on how the batch was split. At
// the first step, with the reference a copy of the policy, every log-ratio
// and so every estimate is 0 and the bug hides; after an update it shows in
// split_invariance, metric_reduction (kl) and world_size_2.
#include "kto_config.h"
#include "kto_loss.h"
#include "kto_module.h"
#include "kto_scoring.h"

#include "ptrain/sdk/plugin.h"
#include "ptrain/sdk/util/reference_model.h"

namespace {

using namespace ptrain;

class PerMicrobatchZ0Module final : public sdk::TrainModule {
 public:
  void setup(sdk::Context& ctx) override {
    kto_.setup(ctx);
    reference_ = sdk::load_reference_model(ctx, kto_.config().reference_model, "reference_model");
  }
  std::vector<sdk::MetricSpec> metric_specs() const override { return kto_.metric_specs(); }
  void check_example(const sdk::Example& example) const override { kto_.check_example(example); }
  void prepare_dataset(sdk::Context& ctx, const std::vector<sdk::Example>& examples) override {
    kto_.prepare_dataset(ctx, examples);
  }
  std::vector<std::unique_ptr<sdk::Microbatch>> prepare(sdk::Context& ctx,
                                                        const std::vector<const sdk::Example*>& examples,
                                                        const sdk::MicrobatchPlan& plan) override {
    std::vector<std::unique_ptr<sdk::Microbatch>> microbatches = kto_.prepare(ctx, examples, plan);
    for (auto& microbatch : microbatches) {
      auto& batch = static_cast<kto::KtoMicrobatch&>(*microbatch);
      const std::vector<int64_t> partners = kto::kl_partners(std::vector<bool>(batch.examples.size(), true));
      std::vector<kto::PromptCompletion> pairs;
      for (size_t i = 0; i < batch.examples.size(); ++i) {
        pairs.push_back({&batch.examples[i].prompt, &batch.examples[partners[i]].completion});
      }
      const int64_t size = static_cast<int64_t>(pairs.size());
      batch.z0 = kto::reference_point(  // the bug: this microbatch's own estimate
          kto::kl_log_ratios(ctx, *reference_, pairs, {size, 0}, ctx.run_info().max_length));
    }
    return microbatches;
  }
  std::vector<sdk::LossTerm> loss_terms() const override { return kto_.loss_terms(); }
  std::vector<int64_t> count_units(const sdk::Microbatch& microbatch) const override {
    return kto_.count_units(microbatch);
  }
  sdk::LossOut microbatch_loss(sdk::Context& ctx, const sdk::Microbatch& microbatch) override {
    return kto_.microbatch_loss(ctx, microbatch);
  }

 private:
  kto::KtoModule kto_;
  std::unique_ptr<sdk::LanguageModel> reference_;
};

sdk::TrainModule* create_module() { return new PerMicrobatchZ0Module(); }

}  // namespace

PTRAIN_DEFINE_PLUGIN("per_microbatch_z0", "0.0.1", "test fixture: KTO with z0 estimated per microbatch (wrong)",
                     ptrain::kto::declare_kto_config, create_module)
