// A rank's pairs cut into microbatches and collated into forward batches.
//
// Unpacked, a token budget bounds twice the longer side of each pair (both
// sides are forwarded). Packed, the pairs themselves are first packed, both
// sides counted, into rows of 2 × row_tokens under micro_tokens to decide
// which pairs share a microbatch; then that microbatch's sequences are packed
// again into rows of row_tokens, so no row is longer than an unpacked one
// would be (attention costs T² per row).
#pragma once

#include "dpo_data.h"

#include "ptrain/sdk/batch.h"
#include "ptrain/sdk/train_module.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace ptrain::dpo {

struct DpoMicrobatch final : sdk::Microbatch {
  PairBatch pairs;
  at::Tensor reference_parts;  // [B, 4] float64 (ReferenceColumn order); undefined without a reference
  int64_t truncated_pairs = 0;
  bool evaluation = false;  // held-out pairs (prepare_eval): nothing of them enters the training state

  void to_device(at::Device device) override;
};

// The pairs of one microbatch, as positions in the rank's list.
struct PairGroup {
  std::vector<int64_t> members;
  // Packing only: the sequences of each packed row, the chosen side of
  // members[k] as k and its rejected side as |members| + k.
  std::optional<std::vector<std::vector<int64_t>>> rows;
};

std::vector<PairGroup> plan_pair_microbatches(const std::vector<TokenizedPair>& pairs, const sdk::MicrobatchPlan& plan);

// The microbatch of `group`, without reference log-probs. concatenated: one
// forward of both sides (unpacked groups only; packed rows always are one).
std::unique_ptr<DpoMicrobatch> collate_pair_group(const std::vector<TokenizedPair>& pairs, const PairGroup& group,
                                                  int64_t pad_id, bool concatenated);

}  // namespace ptrain::dpo
