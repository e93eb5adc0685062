// How many rows of logits one chunk of the loss head holds
// (score_target_rows, target_scores.h), by route (kernel_route.h).
//
// Each chunk is a [rows, V] product against the whole [V, H] head, once in
// forward and twice in backward, plus one [V, H] weight-gradient sum:
//
//   CPU route: chunks of about 2^22 logits (16 MiB in float32), the size
//     measured fastest on the CPU, where a chunk's logits stay in cache.
//   accelerator route: the rows split evenly into chunks of at most 2^28
//     logits (1 GiB in float32) and at least 256 rows, so the head is read
//     a few times per microbatch, not hundreds, and every product is a large
//     one (a GPU runs products with a side below 256 far below its peak).
//     At Qwen2.5-0.5B's vocabulary of 151,936 that is up to 1,766 rows a
//     chunk instead of 27.
#pragma once

#include <cstdint>

namespace ptrain::model {

inline constexpr int64_t kCpuChunkLogits = int64_t{1} << 22;
inline constexpr int64_t kAcceleratorChunkLogits = int64_t{1} << 28;
inline constexpr int64_t kAcceleratorMinChunkRows = 256;

// rows, vocab > 0 → rows per chunk (the last chunk may hold fewer).
int64_t loss_head_chunk_rows(int64_t rows, int64_t vocab, bool cpu_route);

}  // namespace ptrain::model
