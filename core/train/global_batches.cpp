#include "core/train/global_batches.h"

#include "core/data/global_batch_sampler.h"

namespace ptrain::train {

sdk::GlobalBatch training_global_batch(const std::vector<sdk::Example>& examples, const std::vector<int64_t>& indices,
                                       int rank, int world_size) {
  sdk::GlobalBatch batch;
  for (const int64_t index : indices) {
    batch.examples.push_back(&examples.at(static_cast<size_t>(index)));
    batch.ids.push_back(index);
  }
  const auto size = static_cast<int64_t>(indices.size());
  for (int owner = 0; owner < world_size; ++owner) {
    const data::RankSlice slice = data::rank_slice(size, owner, world_size);
    batch.rank_counts.push_back(slice.end - slice.begin);
    if (owner != rank) continue;
    for (int64_t position = slice.begin; position < slice.end; ++position) batch.rank_positions.push_back(position);
  }
  return batch;
}

sdk::GlobalBatch held_out_global_batch(const std::vector<sdk::Example>& examples, int64_t begin, int64_t end, int rank,
                                       int world_size) {
  sdk::GlobalBatch batch;
  batch.held_out = true;
  batch.rank_counts.assign(static_cast<size_t>(world_size), 0);
  for (int64_t i = begin; i < end; ++i) {
    const auto owner = static_cast<int>(i % world_size);
    if (owner == rank) batch.rank_positions.push_back(i - begin);
    ++batch.rank_counts[static_cast<size_t>(owner)];
    batch.examples.push_back(&examples.at(static_cast<size_t>(i)));
    batch.ids.push_back(i);
  }
  return batch;
}

std::vector<const sdk::Example*> rank_share(const sdk::GlobalBatch& batch) {
  std::vector<const sdk::Example*> share;
  for (const int64_t position : batch.rank_positions) share.push_back(batch.examples[static_cast<size_t>(position)]);
  return share;
}

}  // namespace ptrain::train
