#include "sft_config.h"

namespace ptrain::sft {

void declare_sft_config(sdk::ConfigSchema& schema) {
  schema.add_string("loss_agg", "token_mean",
                    "how token losses become the step loss (DESIGN.md §2): token_mean averages over all trainable "
                    "tokens of the global batch; seq_* modes average over sequences",
                    sdk::loss_aggregation_names());
  schema.add_float("norm_constant", 0.0,
                   "C of seq_mean_token_sum_norm (each sequence's token sum is divided by C); 0: data.max_length",
                   0.0);
  schema.add_bool("assistant_only_loss", true,
                  "chat ({\"messages\"}) data: train only on assistant turns, their end-of-turn token included; "
                  "false trains on every token of the conversation");
}

SftConfig read_sft_config(const sdk::ConfigValues& values, int64_t max_length) {
  SftConfig config;
  config.aggregation.mode = sdk::parse_loss_aggregation(values.get_string("loss_agg"));
  const double norm_constant = values.get_float("norm_constant");
  config.aggregation.norm_constant = norm_constant > 0.0 ? norm_constant : static_cast<double>(max_length);
  // Values validated against the schema always hold it; hand-built ones (tests) may not.
  config.assistant_only_loss = !values.has("assistant_only_loss") || values.get_bool("assistant_only_loss");
  return config;
}

}  // namespace ptrain::sft
