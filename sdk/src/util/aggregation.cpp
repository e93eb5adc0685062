#include "ptrain/sdk/util/aggregation.h"

#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>

namespace ptrain::sdk {
namespace {

bool counts_sequences(LossAggregation mode) {
  return mode == LossAggregation::kSeqMeanTokenMean || mode == LossAggregation::kSeqMeanTokenSum ||
         mode == LossAggregation::kSeqMeanTokenSumNorm;
}

void check_mask(const at::Tensor& loss_mask) {
  TORCH_CHECK(loss_mask.dim() == 2 && loss_mask.scalar_type() == at::kBool, "loss_mask must be [B, T] bool, got ",
              loss_mask.sizes(), " ", loss_mask.scalar_type());
}

// Sequence index of each position: the row, or (row, document) of a packed row.
// [B, T] int64 with values in [0, B·T).
at::Tensor sequence_index(const at::Tensor& loss_mask, const at::Tensor& document_ids) {
  const int64_t rows = loss_mask.size(0), columns = loss_mask.size(1);
  const at::Tensor row = at::arange(rows, loss_mask.options().dtype(at::kLong)).unsqueeze(1).expand({rows, columns});
  if (!document_ids.defined()) return row;
  TORCH_CHECK(document_ids.sizes() == loss_mask.sizes() && document_ids.scalar_type() == at::kLong,
              "document_ids must be [B, T] int64 like loss_mask ", loss_mask.sizes(), ", got ", document_ids.sizes(),
              " ", document_ids.scalar_type());
  return row * columns + document_ids.clamp_min(0);  // padding (-1) is never in the mask
}

// Trainable tokens of every sequence that has one. [S] float.
// Every position adds its mask bit (no masked_select: its output size would be
// read back to the host, a sync inside the microbatch loop on a GPU).
at::Tensor tokens_per_sequence(const at::Tensor& loss_mask, const at::Tensor& sequences, at::ScalarType type) {
  return at::zeros({loss_mask.numel()}, loss_mask.options().dtype(type))
      .index_add_(0, sequences.reshape({-1}), loss_mask.reshape({-1}).to(type));
}

int64_t count_units(const at::Tensor& loss_mask, const at::Tensor& document_ids, const AggregationSpec& spec) {
  check_mask(loss_mask);
  if (!counts_sequences(spec.mode)) return loss_mask.sum().item<int64_t>();
  if (!document_ids.defined()) return loss_mask.any(/*dim=*/1).sum().item<int64_t>();
  const at::Tensor counts = tokens_per_sequence(loss_mask, sequence_index(loss_mask, document_ids), at::kLong);
  return counts.gt(0).sum().item<int64_t>();
}

at::Tensor aggregate(const at::Tensor& token_loss, const at::Tensor& loss_mask, const at::Tensor& document_ids,
                     const AggregationSpec& spec) {
  check_mask(loss_mask);
  TORCH_CHECK(token_loss.sizes() == loss_mask.sizes(), "token_loss ", token_loss.sizes(), " and loss_mask ",
              loss_mask.sizes(), " must have the same shape");
  // where() rather than a product so that a non-finite loss at a masked-out
  // position cannot leak into the sum as NaN.
  const at::Tensor masked_loss = at::where(loss_mask, token_loss, at::zeros_like(token_loss));
  switch (spec.mode) {
    case LossAggregation::kTokenMean:
    case LossAggregation::kSeqMeanTokenSum:
    case LossAggregation::kSum:
      return masked_loss.sum();
    case LossAggregation::kSeqMeanTokenSumNorm:
      return masked_loss.sum() / spec.norm_constant;
    case LossAggregation::kSeqMeanTokenMean: {
      // Sequences without a trainable token divide 0 by 1 and add nothing.
      if (!document_ids.defined()) {
        const at::Tensor tokens = loss_mask.sum(/*dim=*/1).clamp_min(1).to(token_loss.scalar_type());
        return (masked_loss.sum(/*dim=*/1) / tokens).sum();
      }
      const at::Tensor sequences = sequence_index(loss_mask, document_ids);
      const at::Tensor tokens = tokens_per_sequence(loss_mask, sequences, token_loss.scalar_type()).clamp_min(1);
      const at::Tensor loss_per_sequence = at::zeros({loss_mask.numel()}, token_loss.options())
                                               .index_add(0, sequences.reshape({-1}), masked_loss.reshape({-1}));
      return (loss_per_sequence / tokens).sum();
    }
  }
  throw Error("unhandled loss aggregation mode");
}

}  // namespace

const std::vector<std::pair<std::string, LossAggregation>>& loss_aggregation_choices() {
  static const std::vector<std::pair<std::string, LossAggregation>> choices{
      {"token_mean", LossAggregation::kTokenMean},
      {"seq_mean_token_mean", LossAggregation::kSeqMeanTokenMean},
      {"seq_mean_token_sum", LossAggregation::kSeqMeanTokenSum},
      {"seq_mean_token_sum_norm", LossAggregation::kSeqMeanTokenSumNorm},
      {"sum", LossAggregation::kSum}};
  return choices;
}

const std::vector<std::string>& loss_aggregation_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> listed;
    for (const auto& [name, mode] : loss_aggregation_choices()) listed.push_back(name);
    return listed;
  }();
  return names;
}

const char* loss_aggregation_name(LossAggregation mode) {
  return loss_aggregation_names().at(static_cast<size_t>(mode)).c_str();
}

LossAggregation parse_loss_aggregation(const std::string& name) {
  const auto& names = loss_aggregation_names();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<LossAggregation>(i);
  }
  std::string allowed;
  for (const auto& candidate : names) allowed += (allowed.empty() ? "" : ", ") + candidate;
  throw ConfigError("unknown loss aggregation '" + name + "' (expected one of: " + allowed + ")");
}

int64_t count_loss_units(const at::Tensor& loss_mask, const AggregationSpec& spec) {
  return count_units(loss_mask, at::Tensor(), spec);
}

at::Tensor aggregate_loss_sum(const at::Tensor& token_loss, const at::Tensor& loss_mask, const AggregationSpec& spec) {
  return aggregate(token_loss, loss_mask, at::Tensor(), spec);
}

int64_t count_loss_units(const TokenBatch& batch, const AggregationSpec& spec) {
  return count_units(batch.loss_mask, batch.document_ids, spec);
}

at::Tensor aggregate_loss_sum(const at::Tensor& token_loss, const TokenBatch& batch, const AggregationSpec& spec) {
  return aggregate(token_loss, batch.loss_mask, batch.document_ids, spec);
}

TermDivisor term_divisor(const AggregationSpec& spec) {
  return spec.mode == LossAggregation::kSum ? TermDivisor::kOne : TermDivisor::kGlobalUnits;
}

}  // namespace ptrain::sdk
