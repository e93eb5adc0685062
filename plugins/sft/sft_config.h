// [module] settings of the SFT plugin.
#pragma once

#include "ptrain/sdk/aggregation.h"
#include "ptrain/sdk/config_schema.h"

namespace ptrain::sft {

struct SftConfig {
  sdk::AggregationSpec aggregation;  // loss_agg, and norm_constant for seq_mean_token_sum_norm
  bool assistant_only_loss = true;   // chat data: train on assistant turns only (content + end of turn)
};

void declare_sft_config(sdk::ConfigSchema& schema);

// `max_length` is the default norm constant (the longest sequence a run trains on).
SftConfig read_sft_config(const sdk::ConfigValues& values, int64_t max_length);

}  // namespace ptrain::sft
