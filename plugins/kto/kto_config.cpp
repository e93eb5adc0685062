#include "kto_config.h"

#include "ptrain/sdk/util/config_binder.h"

namespace ptrain::kto {
namespace {

const sdk::ConfigBinder<KtoConfig>& binder() {
  static const sdk::Choices<KtoLossType> loss_types{{"kto", KtoLossType::kKto},
                                                    {"apo_zero_unpaired", KtoLossType::kApoZeroUnpaired}};
  static const auto binder =
      sdk::ConfigBinder<KtoConfig>()
          .choice("loss_type", &KtoConfig::loss_type, loss_types, KtoLossType::kKto,
                  "kto: 1 − σ(β(r − z0)) for a desirable completion, 1 − σ(β(z0 − r)) for an undesirable one, r "
                  "the log-ratio to the reference and z0 the KL reference point over the global batch; "
                  "apo_zero_unpaired: 1 − σ(βr) and σ(βr), no z0 (TRL's KTOConfig.loss_type)")
          .key("beta", &KtoConfig::beta, 0.1, "β: the higher, the closer the policy stays to the reference",
               sdk::above(0.0))
          .key("desirable_weight", &KtoConfig::desirable_weight, 1.0,
               "λ_D: weight of each desirable example's loss (to balance unequal counts; KTO's paper keeps "
               "λ_D·n_D / (λ_U·n_U) within [1, 4/3])",
               sdk::above(0.0))
          .key("undesirable_weight", &KtoConfig::undesirable_weight, 1.0,
               "λ_U: weight of each undesirable example's loss", sdk::above(0.0))
          .key("reference_model", &KtoConfig::reference_model, "",
               "the frozen reference: a Hugging Face model directory; empty: a copy of the initial policy taken at "
               "setup");
  return binder;
}

}  // namespace

void declare_kto_config(sdk::ConfigSchema& schema) { binder().declare(schema); }

KtoConfig read_kto_config(const sdk::ConfigValues& values) { return binder().read(values); }

}  // namespace ptrain::kto
