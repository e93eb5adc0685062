// Which examples make up each global batch, and which part of it a rank takes.
//
// A global batch depends only on (seed, epoch, step): every epoch is a seeded
// permutation of the dataset cut into consecutive batches of global_size
// (the remainder that does not fill a batch is left out of that epoch), so
// world size, microbatch size and accumulation never change its content.
#pragma once

#include <cstdint>
#include <vector>

namespace ptrain::data {

class GlobalBatchSampler {
 public:
  GlobalBatchSampler(int64_t dataset_size, int64_t global_size, uint64_t seed);

  struct Position {
    int64_t epoch = 0;
    int64_t step_in_epoch = 0;
  };

  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  Position position(int64_t step) const;
  // Dataset indices of the global batch of `step` (0-based), in batch order.
  std::vector<int64_t> global_batch(int64_t step) const;

 private:
  std::vector<int64_t> epoch_permutation(int64_t epoch) const;

  int64_t dataset_size_;
  int64_t global_size_;
  uint64_t seed_;
  int64_t steps_per_epoch_;
};

struct RankSlice {
  int64_t begin = 0;
  int64_t end = 0;
};

// The contiguous part [begin, end) of a global batch of `global_size` examples
// that `rank` of `world_size` takes; sizes differ by at most one.
RankSlice rank_slice(int64_t global_size, int rank, int world_size);

// Dataset indices of the examples `rank` computes in `step`: its slice of the global batch.
std::vector<int64_t> rank_example_indices(const GlobalBatchSampler& sampler, int64_t step, int rank, int world_size);

}  // namespace ptrain::data
