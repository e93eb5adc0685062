// A model's sequence log-probs of both sides of a microbatch's pairs, split
// at LD-DPO's shared length (dpo_loss.h): the policy's for the loss, a
// reference model's for ρ.
#pragma once

#include "dpo_data.h"
#include "dpo_loss.h"

#include "ptrain/sdk/model.h"

namespace ptrain::dpo {

struct ScoredPairs {
  SequenceLogProbParts chosen;    // [B] each
  SequenceLogProbParts rejected;  // [B] each
};

// From one forward of `model` (concatenated or packed) or two (separate),
// with gradients unless the caller disables them.
ScoredPairs score_pairs(sdk::LanguageModel& model, const PairBatch& batch);

}  // namespace ptrain::dpo
