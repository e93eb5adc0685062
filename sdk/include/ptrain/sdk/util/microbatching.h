// Cutting a rank's examples into microbatches (by count, by a token budget,
// or packed into rows) and padding token sequences into tensors.
#pragma once

#include "ptrain/sdk/batch.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace ptrain::sdk {

// Splits examples with the given lengths (in tokens) into microbatches
// following the plan. Returns the example positions of each microbatch, in
// order of position unless plan.group_by_length sorts them longest first.
// Under a token budget an example longer than the budget gets a microbatch of
// its own.
std::vector<std::vector<int64_t>> split_into_microbatches(const std::vector<int64_t>& lengths,
                                                          const MicrobatchPlan& plan);

// Packing: the rows of each microbatch, each row the example positions packed
// into it. Rows are filled by best-fit-decreasing (each example, longest
// first, goes to the fullest row it still fits in; ties go to the earlier
// row) under plan.row_tokens, then cut into microbatches of at most
// plan.micro_tokens padded tokens. An example longer than row_tokens gets a
// row of its own. Deterministic in the lengths alone.
using PackedMicrobatch = std::vector<std::vector<int64_t>>;
std::vector<PackedMicrobatch> plan_packed_microbatches(const std::vector<int64_t>& lengths, const MicrobatchPlan& plan);

// Per-position document index and restarting position of packed rows whose
// documents have the given lengths (row r: documents of lengths rows[r]),
// right-padded to the longest row: document -1 and position 0 on padding.
// Returns {document_ids, position_ids}, each [R, T] int64.
std::pair<at::Tensor, at::Tensor> packed_document_layout(const std::vector<std::vector<int64_t>>& rows);

// Right-pads token sequences into a [B, T] int64 tensor (T = longest).
at::Tensor pad_sequences(const std::vector<std::vector<int64_t>>& sequences, int64_t pad_id);

}  // namespace ptrain::sdk
