// The sdk::GlobalBatch each prepare() and prepare_eval() call sees
// (Context::global_batch()): the whole batch, the same on every rank, and
// where this rank's share of it sits.
#pragma once

#include "ptrain/sdk/batch.h"

#include <cstdint>
#include <vector>

namespace ptrain::train {

// An update step's batch: `indices` into the training set, in batch order;
// rank r takes the contiguous slice data::rank_slice gives it.
sdk::GlobalBatch training_global_batch(const std::vector<sdk::Example>& examples, const std::vector<int64_t>& indices,
                                       int rank, int world_size);

// A chunk [begin, end) of the held-out set: example i goes to rank i mod R
// (train::Evaluator); ids are the positions i.
sdk::GlobalBatch held_out_global_batch(const std::vector<sdk::Example>& examples, int64_t begin, int64_t end, int rank,
                                       int world_size);

// This rank's examples of `batch`, in the order prepare() gets them.
std::vector<const sdk::Example*> rank_share(const sdk::GlobalBatch& batch);

}  // namespace ptrain::train
