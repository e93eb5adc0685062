// How gradients are grouped into buckets for the collectives of a step, and,
// under sharded data parallel (docs/distributed.md#sharding-distributedsharding), which part of every bucket each
// rank owns.
//
// Buckets hold about `bucket_bytes` of float32 gradients each, in reverse
// parameter order (the order backward produces them); a parameter is never
// split between buckets. With R shards a bucket of n elements is padded with
// zeros to R·c elements (c = ceil(n / R)), and rank r owns elements
// [r·c, (r+1)·c): the equal chunks a reduce-scatter hands out. A parameter may
// straddle a chunk boundary, so a rank's part of it is a "piece": a
// contiguous range of its flattened elements.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ptrain::dist {

struct BucketLayout {
  std::vector<size_t> parameters;  // indices into the parameter list
  std::vector<int64_t> offsets;    // element offset of each parameter in the bucket
  int64_t numel = 0;               // elements of the parameters, without padding
  int64_t chunk = 0;               // elements each shard owns; chunk * shards >= numel
};

// `shards` 1: no padding, chunk == numel.
std::vector<BucketLayout> plan_buckets(const std::vector<int64_t>& parameter_numels, int64_t bucket_bytes, int shards);

// The part of one parameter that lies in one rank's chunk of its bucket.
struct ShardPiece {
  size_t bucket = 0;
  size_t parameter = 0;
  int64_t parameter_offset = 0;  // into the flattened parameter
  int64_t chunk_offset = 0;      // into the rank's chunk of the bucket
  int64_t numel = 0;
};

// Rank `rank`'s pieces, bucket by bucket; empty pieces are left out.
std::vector<ShardPiece> shard_pieces(const std::vector<BucketLayout>& buckets, int rank);

}  // namespace ptrain::dist
