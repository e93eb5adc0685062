// Gradient buckets and their shards (core/dist/bucket_layout.h): every
// element of every parameter is owned by exactly one rank, in a chunk of the
// size a reduce-scatter hands out, at the offsets the pieces say.
#include "catch.h"

#include "core/dist/bucket_layout.h"

#include <vector>

using namespace ptrain;

TEST_CASE("bucket shards cover every parameter element exactly once", "[sharding]") {
  const std::vector<int64_t> numels{5, 3, 7, 1, 4, 9};
  constexpr int64_t kBucketBytes = 4 * 10;  // at most 10 float32 elements unless one parameter is larger
  for (const int shards : {1, 2, 3, 4}) {
    INFO("shards " << shards);
    const std::vector<dist::BucketLayout> buckets = dist::plan_buckets(numels, kBucketBytes, shards);
    // Reverse parameter order, never splitting one: {9}, {4, 1}, {7, 3} (exactly 10), {5}.
    REQUIRE(buckets.size() == 4);
    CHECK(buckets[0].parameters == std::vector<size_t>{5});
    CHECK(buckets[1].parameters == std::vector<size_t>{4, 3});
    CHECK(buckets[2].parameters == std::vector<size_t>{2, 1});
    CHECK(buckets[3].parameters == std::vector<size_t>{0});
    for (const dist::BucketLayout& bucket : buckets) {
      CHECK(bucket.chunk == (bucket.numel + shards - 1) / shards);
    }

    std::vector<std::vector<int>> owners(numels.size());
    for (size_t p = 0; p < numels.size(); ++p) owners[p].assign(static_cast<size_t>(numels[p]), 0);
    for (int rank = 0; rank < shards; ++rank) {
      for (const dist::ShardPiece& piece : dist::shard_pieces(buckets, rank)) {
        const dist::BucketLayout& bucket = buckets[piece.bucket];
        REQUIRE(piece.numel > 0);
        REQUIRE(piece.chunk_offset + piece.numel <= bucket.chunk);
        // The piece's place in the bucket is the same seen from the rank's chunk and from the parameter.
        size_t slot = 0;
        while (bucket.parameters[slot] != piece.parameter) ++slot;
        CHECK(bucket.chunk * rank + piece.chunk_offset == bucket.offsets[slot] + piece.parameter_offset);
        for (int64_t e = 0; e < piece.numel; ++e) ++owners[piece.parameter][piece.parameter_offset + e];
      }
    }
    for (size_t p = 0; p < numels.size(); ++p) {
      for (const int count : owners[p]) CHECK(count == 1);
    }
  }
}

TEST_CASE("one shard is the replicated layout: no padding", "[sharding]") {
  const std::vector<dist::BucketLayout> buckets = dist::plan_buckets({6, 2}, 1 << 20, 1);
  REQUIRE(buckets.size() == 1);
  CHECK(buckets[0].numel == 8);
  CHECK(buckets[0].chunk == 8);
  CHECK(buckets[0].offsets == std::vector<int64_t>{0, 2});
}
