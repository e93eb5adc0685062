// How the loss head (score_target_rows, target_scores.h) splits its rows and
// what it keeps for the backward, by route (kernel_route.h).
//
// Each chunk is a [rows, V] product against the whole [V, H] head in forward,
// then two in backward, plus one [V, H] weight-gradient sum:
//
//   CPU route: chunks of about 2^22 logits (16 MiB in float32), the size
//     measured fastest on the CPU, where a chunk's logits stay in cache. The
//     forward keeps each row's logsumexp and the backward recomputes the
//     chunk's logits from it (a third product), so no more than one chunk of
//     logits is ever held.
//   accelerator route: the rows split evenly into chunks of at most 2^28
//     logits (1 GiB in float32) and at least 256 rows, so the head is read
//     a few times per microbatch, not hundreds, and every product is a large
//     one (a GPU runs products with a side below 256 far below its peak).
//     At Qwen2.5-0.5B's vocabulary of 151,936 that is up to 1,766 rows a
//     chunk instead of 27. When the rows' float32 log-softmax fits in 2^31
//     logits (8 GiB; 4 bytes a logit, against the 10 of a PyTorch loop's
//     bf16 logits, their float32 copy and its log-softmax), the forward
//     keeps it for the backward, which then needs no third product: the
//     softmax is one exp of what was kept, where recomputing takes the
//     product, a subtraction and an exp. Past that, it recomputes as the
//     CPU route does.
#pragma once

#include <cstdint>

namespace ptrain::model {

inline constexpr int64_t kCpuChunkLogits = int64_t{1} << 22;
inline constexpr int64_t kAcceleratorChunkLogits = int64_t{1} << 28;
inline constexpr int64_t kAcceleratorMinChunkRows = 256;
inline constexpr int64_t kAcceleratorKeptLogits = int64_t{1} << 31;

// rows, vocab > 0 → rows per chunk (the last chunk may hold fewer).
int64_t loss_head_chunk_rows(int64_t rows, int64_t vocab, bool cpu_route);

// Whether a forward over `rows` that will be differentiated keeps its
// log-softmax for the backward rather than recomputing the logits there.
bool loss_head_keeps_log_softmax(int64_t rows, int64_t vocab, bool cpu_route);

}  // namespace ptrain::model
