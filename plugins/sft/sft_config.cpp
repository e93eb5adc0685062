#include "sft_config.h"

#include "ptrain/sdk/util/config_binder.h"

namespace ptrain::sft {
namespace {

const sdk::ConfigBinder<SftConfig>& binder() {
  static const auto binder =
      sdk::ConfigBinder<SftConfig>()
          .choice("loss_agg", &SftConfig::loss_agg, sdk::loss_aggregation_choices(), sdk::LossAggregation::kTokenMean,
                  "how token losses become the step loss (docs/architecture.md, the update step): token_mean "
                  "averages over all trainable tokens of the global batch; seq_* modes average over sequences")
          .key("norm_constant", &SftConfig::norm_constant, 0.0,
               "C of seq_mean_token_sum_norm (each sequence's token sum is divided by C); 0: data.max_length",
               sdk::at_least(0.0))
          .key("assistant_only_loss", &SftConfig::assistant_only_loss, true,
               "chat ({\"messages\"}) data: train only on assistant turns, their end-of-turn token included; false "
               "trains on every token of the conversation");
  return binder;
}

}  // namespace

void declare_sft_config(sdk::ConfigSchema& schema) { binder().declare(schema); }

SftConfig read_sft_config(const sdk::ConfigValues& values, int64_t max_length) {
  SftConfig config = binder().read(values);
  config.aggregation.mode = config.loss_agg;
  config.aggregation.norm_constant = config.norm_constant > 0.0 ? config.norm_constant : static_cast<double>(max_length);
  return config;
}

}  // namespace ptrain::sft
