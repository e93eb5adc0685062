// Fused kernels, each with its own backward, for the decoder's two
// memory-bound blocks that ATen runs as chains of small ops:
//
//   rms_norm  weight ⊙ x / √(mean(x²) + eps): pow, mean, add, rsqrt, mul, mul
//             forward and about eight ops back, each a pass over [B, T, H];
//             here one pass forward and one back.
//   rotary    x ⊙ cos + rotate_half(x) ⊙ sin: narrow, neg, cat, mul, mul, add
//             each way, plus the copy that made the transposed heads
//             contiguous; here one pass each way, writing the [B, n, T, d]
//             layout attention reads, with an optional scale folded in.
//
// rms_norm runs on float32 CPU tensors on the CPU route (kernel_route.h),
// and on float32 CUDA tensors takes PyTorch's fused kernel (LibTorch ≥ 2.9);
// rotary on float32 CPU tensors on either route and, in a CUDA build, on
// float32 CUDA tensors (rotary.cu: the same arithmetic and indexing,
// rotary_math.h). Other devices, dtypes and routes take the composite ATen
// expression, which is the same function: tests/unit/test_fused_kernels.cpp
// checks values and gradients of both, on every device it finds.
#pragma once

#include <ATen/core/Tensor.h>

namespace ptrain::model::fused {

// weight ⊙ x / √(mean(x²) + eps) over the last dimension. x: [..., H], weight: [H].
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

// Rotary embeddings in the rotate-half convention, times `scale`:
//   scale · (x ⊙ cos + rotate_half(x) ⊙ sin),  rotate_half([a, b]) = [−b, a]
// x: [B, T, n, d] (a projection's output viewed per head); cos, sin: [T, d]
// (every row at positions 0..T−1) or [B, T, d] (each token's own position),
// not differentiated. Returns [B, n, T, d], contiguous.
at::Tensor rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, double scale);

}  // namespace ptrain::model::fused
