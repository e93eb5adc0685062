#include "dpo_scoring.h"

#include <ATen/ATen.h>

namespace ptrain::dpo {

ScoredPairs score_pairs(sdk::LanguageModel& model, const PairBatch& batch) {
  const int64_t num_pairs = batch.chosen_tokens.size(0);
  TORCH_CHECK(
      batch.forwards.size() == batch.shared_masks.size() && (batch.forwards.size() == 1 || batch.forwards.size() == 2),
      "a pair batch has one (concatenated) or two forwards, got ", batch.forwards.size());
  ScoredPairs scored;
  if (batch.forwards.size() == 1) {
    const sdk::TokenBatch& forward = batch.forwards[0];
    // One sequence per row (2B rows), or packed rows holding 2B sequences.
    TORCH_CHECK(batch.sequence_ids.defined() || forward.input_ids.size(0) == 2 * num_pairs,
                "a concatenated forward of ", num_pairs, " pairs must have ", 2 * num_pairs, " rows, got ",
                forward.input_ids.size(0));
    const at::Tensor log_probs = model.target_log_probs(forward).log_probs;  // [R, T]
    const SequenceLogProbParts parts =
        sequence_log_prob_parts(log_probs, forward.loss_mask, batch.shared_masks[0], batch.sequence_ids, 2 * num_pairs);
    scored.chosen = {parts.shared.narrow(0, 0, num_pairs), parts.rest.narrow(0, 0, num_pairs)};
    scored.rejected = {parts.shared.narrow(0, num_pairs, num_pairs), parts.rest.narrow(0, num_pairs, num_pairs)};
    return scored;
  }
  for (size_t side = 0; side < 2; ++side) {
    const sdk::TokenBatch& forward = batch.forwards[side];
    TORCH_CHECK(forward.input_ids.size(0) == num_pairs, "a separate forward of ", num_pairs, " pairs must have ",
                num_pairs, " rows, got ", forward.input_ids.size(0));
    const at::Tensor log_probs = model.target_log_probs(forward).log_probs;  // [B, T]
    (side == 0 ? scored.chosen : scored.rejected) =
        sequence_log_prob_parts(log_probs, forward.loss_mask, batch.shared_masks[side]);
  }
  return scored;
}

}  // namespace ptrain::dpo
