// The rotary map of fused::rotary (fused_kernels.h), per pair of entries
// (i, i + d/2) of one token's head, and where that head sits in the two
// layouts: shared by the CPU kernel (fused_kernels.cpp) and the CUDA kernel
// (rotary.cu), so tests/unit/test_fused_kernels.cpp's checks of the CPU
// kernel check the GPU's arithmetic and indexing too.
#pragma once

#include "core/model/host_device.h"

#include <cstdint>

namespace ptrain::model::rotary_math {

// x: [B, T, n, d] (token-major) ↔ out: [B, n, T, d] (head-major); the angle
// tables cos, sin: [T, d] shared by every row (row_stride 0) or [B, T, d]
// (row_stride T·d). A token is an index into B·T.
struct Layout {
  int64_t t, n, d, table_row_stride;

  PTRAIN_HOST_DEVICE int64_t token_major(int64_t token, int64_t head) const { return (token * n + head) * d; }
  PTRAIN_HOST_DEVICE int64_t head_major(int64_t token, int64_t head) const {
    return ((token / t * n + head) * t + token % t) * d;
  }
  PTRAIN_HOST_DEVICE int64_t table(int64_t token) const { return token / t * table_row_stride + token % t * d; }
};

// Entries i and i + h of a head (h = d/2): of x, or of its angles' cos or sin.
// (nvcc may fuse a product and a sum below into one FMA, so the GPU's results
// may differ from the CPU's in the last bit.)
struct Pair {
  float low, high;
};

// y[i] = scale·(x[i]·c[i] − x[i+h]·s[i]),  y[i+h] = scale·(x[i+h]·c[i+h] + x[i]·s[i+h])
PTRAIN_HOST_DEVICE inline Pair rotate(Pair x, Pair c, Pair s, float scale) {
  return {scale * (x.low * c.low - x.high * s.low), scale * (x.high * c.high + x.low * s.high)};
}

// Its transpose, from the output's gradient g to x's:
// dx[i] = scale·(g[i]·c[i] + g[i+h]·s[i+h]),  dx[i+h] = scale·(g[i+h]·c[i+h] − g[i]·s[i])
PTRAIN_HOST_DEVICE inline Pair rotate_adjoint(Pair g, Pair c, Pair s, float scale) {
  return {scale * (g.low * c.low + g.high * s.high), scale * (g.high * c.high - g.low * s.low)};
}

// Pair i of the head at `in` under the map (kAdjoint: its transpose), into pair i of the head at `out`.
template <bool kAdjoint>
PTRAIN_HOST_DEVICE inline void map_pair(const float* in, float* out, const float* c, const float* s, int64_t i,
                                        int64_t half, float scale) {
  const Pair v{in[i], in[i + half]}, cos_pair{c[i], c[i + half]}, sin_pair{s[i], s[i + half]};
  const Pair result = kAdjoint ? rotate_adjoint(v, cos_pair, sin_pair, scale) : rotate(v, cos_pair, sin_pair, scale);
  out[i] = result.low;
  out[i + half] = result.high;
}

}  // namespace ptrain::model::rotary_math
