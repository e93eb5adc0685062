// fused::rotary on CUDA (fused_kernels.h): one thread per pair of a token's
// head, with the arithmetic and indexing of rotary_math.h.
#include "core/model/cuda_launch.cuh"
#include "core/model/rotary_cuda.h"

namespace ptrain::model::rotary_cuda {
namespace {

// Consecutive threads take consecutive pairs of one head, then the next head
// of the token: reads and writes stay contiguous within each head.
__global__ void rotary_kernel(const float* __restrict__ in, float* __restrict__ out, const float* __restrict__ cos,
                              const float* __restrict__ sin, int64_t pairs, rotary_math::Layout layout, float scale,
                              bool adjoint) {
  const int64_t half = layout.d / 2;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; index < pairs; index += stride) {
    const int64_t i = index % half;
    const int64_t head = index / half % layout.n;
    const int64_t token = index / half / layout.n;
    const float* c = cos + layout.table(token);
    const float* s = sin + layout.table(token);
    const int64_t token_major = layout.token_major(token, head), head_major = layout.head_major(token, head);
    if (!adjoint) {
      rotary_math::map_pair<false>(in + token_major, out + head_major, c, s, i, half, scale);
    } else {
      rotary_math::map_pair<true>(in + head_major, out + token_major, c, s, i, half, scale);
    }
  }
}

}  // namespace

const char* launch_rotary(const float* in, float* out, const float* cos, const float* sin, int64_t tokens,
                          rotary_math::Layout layout, float scale, bool adjoint, void* stream) {
  const int64_t pairs = tokens * layout.n * (layout.d / 2);
  if (pairs == 0) return nullptr;
  rotary_kernel<<<cuda_launch::blocks_for(pairs), cuda_launch::kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      in, out, cos, sin, pairs, layout, scale, adjoint);
  return cuda_launch::last_error();
}

}  // namespace ptrain::model::rotary_cuda
