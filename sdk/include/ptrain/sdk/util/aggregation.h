// Loss aggregation modes shared by all plugins (docs/plugins.md, "Loss terms
// and aggregation modes").
//
// With per-token loss l, mask m over sequences i and tokens t, one microbatch adds
//   mode                     S (sum)                     n (units)
//   token_mean               Σ_i Σ_t m·l                 Σ_i Σ_t m
//   seq_mean_token_mean      Σ_i (Σ_t m·l / Σ_t m)       sequences with Σ_t m > 0
//   seq_mean_token_sum       Σ_i Σ_t m·l                 sequences with Σ_t m > 0
//   seq_mean_token_sum_norm  Σ_i Σ_t m·l / C             sequences with Σ_t m > 0
//   sum                      Σ_i Σ_t m·l                 Σ_i Σ_t m (only to detect an empty step)
// and the step loss is L = ΣS / divisor, divisor = N = Σn over all microbatches
// and ranks, except in `sum` mode where the divisor is fixed at 1.
// A sequence with no trainable token adds nothing to S or n.
#pragma once

#include "ptrain/sdk/batch.h"
#include "ptrain/sdk/train_module.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ptrain::sdk {

enum class LossAggregation { kTokenMean, kSeqMeanTokenMean, kSeqMeanTokenSum, kSeqMeanTokenSumNorm, kSum };

struct AggregationSpec {
  LossAggregation mode = LossAggregation::kTokenMean;
  double norm_constant = 1.0;  // C of seq_mean_token_sum_norm
};

// Each mode's config spelling (sdk::Choices<LossAggregation>, config_binder.h).
const std::vector<std::pair<std::string, LossAggregation>>& loss_aggregation_choices();
const std::vector<std::string>& loss_aggregation_names();
LossAggregation parse_loss_aggregation(const std::string& name);  // throws ConfigError
const char* loss_aggregation_name(LossAggregation mode);

// n: loss units of a microbatch. loss_mask: [B, T] bool.
int64_t count_loss_units(const at::Tensor& loss_mask, const AggregationSpec& spec);

// S: differentiable scalar sum. token_loss: [B, T] float; loss_mask: [B, T] bool.
at::Tensor aggregate_loss_sum(const at::Tensor& token_loss, const at::Tensor& loss_mask,
                              const AggregationSpec& spec);

// The same over a TokenBatch, where a "sequence" is a document: one per row,
// or each document of a packed row (batch.document_ids), so packed and padded
// batches give the same S and n.
int64_t count_loss_units(const TokenBatch& batch, const AggregationSpec& spec);
at::Tensor aggregate_loss_sum(const at::Tensor& token_loss, const TokenBatch& batch, const AggregationSpec& spec);

// How the step loss divides the term's global unit count: by N, or by 1 in `sum` mode.
TermDivisor term_divisor(const AggregationSpec& spec);

}  // namespace ptrain::sdk
