// [module] settings of the SFT plugin.
#pragma once

#include "ptrain/sdk/config_schema.h"
#include "ptrain/sdk/util/aggregation.h"

namespace ptrain::sft {

// The defaults live with the keys (sft_config.cpp); the zeros below are only
// the state of a config nothing was read into.
struct SftConfig {
  sdk::LossAggregation loss_agg = sdk::LossAggregation::kTokenMean;
  double norm_constant = 0.0;        // C of seq_mean_token_sum_norm; 0: data.max_length
  bool assistant_only_loss = false;  // chat data: train on assistant turns only (content + end of turn)
  sdk::AggregationSpec aggregation;  // loss_agg with its resolved norm constant
};

void declare_sft_config(sdk::ConfigSchema& schema);

// `max_length` is the default norm constant (the longest sequence a run trains on).
SftConfig read_sft_config(const sdk::ConfigValues& values, int64_t max_length);

}  // namespace ptrain::sft
