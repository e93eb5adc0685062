#include "core/dist/bucket_layout.h"

#include <algorithm>

namespace ptrain::dist {

std::vector<BucketLayout> plan_buckets(const std::vector<int64_t>& parameter_numels, int64_t bucket_bytes, int shards) {
  std::vector<BucketLayout> buckets;
  BucketLayout current;
  const auto close_bucket = [&] {
    if (current.parameters.empty()) return;
    current.chunk = (current.numel + shards - 1) / shards;
    buckets.push_back(std::move(current));
    current = BucketLayout{};
  };
  for (size_t i = parameter_numels.size(); i-- > 0;) {
    const int64_t numel = parameter_numels[i];
    if (!current.parameters.empty() && (current.numel + numel) * 4 > bucket_bytes) close_bucket();
    current.parameters.push_back(i);
    current.offsets.push_back(current.numel);
    current.numel += numel;
  }
  close_bucket();
  return buckets;
}

std::vector<ShardPiece> shard_pieces(const std::vector<BucketLayout>& buckets, int rank) {
  std::vector<ShardPiece> pieces;
  for (size_t b = 0; b < buckets.size(); ++b) {
    const BucketLayout& bucket = buckets[b];
    const int64_t chunk_begin = bucket.chunk * rank;
    const int64_t chunk_end = chunk_begin + bucket.chunk;
    for (size_t slot = 0; slot < bucket.parameters.size(); ++slot) {
      const int64_t begin = bucket.offsets[slot];
      const int64_t end = slot + 1 < bucket.parameters.size() ? bucket.offsets[slot + 1] : bucket.numel;
      const int64_t overlap_begin = std::max(begin, chunk_begin);
      const int64_t overlap_end = std::min(end, chunk_end);
      if (overlap_begin >= overlap_end) continue;
      pieces.push_back({b, bucket.parameters[slot], overlap_begin - begin, overlap_begin - chunk_begin,
                        overlap_end - overlap_begin});
    }
  }
  return pieces;
}

}  // namespace ptrain::dist
