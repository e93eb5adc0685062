#include "core/model/loss_head_chunks.h"

#include <algorithm>

namespace ptrain::model {

int64_t loss_head_chunk_rows(int64_t rows, int64_t vocab, bool cpu_route) {
  rows = std::max<int64_t>(1, rows);
  vocab = std::max<int64_t>(1, vocab);
  if (cpu_route) return std::max<int64_t>(1, kCpuChunkLogits / vocab);
  const int64_t max_rows = std::max(kAcceleratorMinChunkRows, kAcceleratorChunkLogits / vocab);
  const int64_t chunks = (rows + max_rows - 1) / max_rows;
  return (rows + chunks - 1) / chunks;  // even chunks: no small remainder product
}

bool loss_head_keeps_log_softmax(int64_t rows, int64_t vocab, bool cpu_route) {
  return !cpu_route && rows <= kAcceleratorKeptLogits / std::max<int64_t>(1, vocab);
}

}  // namespace ptrain::model
