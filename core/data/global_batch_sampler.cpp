#include "core/data/global_batch_sampler.h"

#include "ptrain/sdk/errors.h"

#include <numeric>
#include <random>
#include <string>

namespace ptrain::data {
namespace {

// SplitMix64 finaliser: decorrelates nearby (seed, epoch) pairs.
uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

GlobalBatchSampler::GlobalBatchSampler(int64_t dataset_size, int64_t global_size, uint64_t seed)
    : dataset_size_(dataset_size), global_size_(global_size), seed_(seed),
      steps_per_epoch_(global_size > 0 ? dataset_size / global_size : 0) {
  if (global_size_ <= 0 || dataset_size_ < global_size_) {
    throw sdk::ConfigError("batch.global_size = " + std::to_string(global_size_) + " needs at least that many examples, " +
                           "but the dataset has " + std::to_string(dataset_size_));
  }
}

GlobalBatchSampler::Position GlobalBatchSampler::position(int64_t step) const {
  return {step / steps_per_epoch_, step % steps_per_epoch_};
}

std::vector<int64_t> GlobalBatchSampler::epoch_permutation(int64_t epoch) const {
  std::vector<int64_t> order(dataset_size_);
  std::iota(order.begin(), order.end(), 0);
  // Fisher–Yates written out with a standard-specified engine: std::shuffle
  // and std::uniform_int_distribution differ between standard libraries, and
  // the data order must not.
  std::mt19937_64 engine(mix64(seed_ ^ mix64(static_cast<uint64_t>(epoch))));
  for (int64_t i = dataset_size_ - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(engine() % static_cast<uint64_t>(i + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

std::vector<int64_t> GlobalBatchSampler::global_batch(int64_t step) const {
  const Position where = position(step);
  const std::vector<int64_t> order = epoch_permutation(where.epoch);
  const auto begin = order.begin() + where.step_in_epoch * global_size_;
  return std::vector<int64_t>(begin, begin + global_size_);
}

RankSlice rank_slice(int64_t global_size, int rank, int world_size) {
  const int64_t base = global_size / world_size;
  const int64_t extra = global_size % world_size;
  const int64_t begin = rank * base + std::min<int64_t>(rank, extra);
  return {begin, begin + base + (rank < extra ? 1 : 0)};
}

std::vector<int64_t> rank_example_indices(const GlobalBatchSampler& sampler, int64_t step, int rank, int world_size) {
  const std::vector<int64_t> global_batch = sampler.global_batch(step);
  const RankSlice slice = rank_slice(static_cast<int64_t>(global_batch.size()), rank, world_size);
  return std::vector<int64_t>(global_batch.begin() + slice.begin, global_batch.begin() + slice.end);
}

}  // namespace ptrain::data
