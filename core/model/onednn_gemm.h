// The model's products on oneDNN, for gemm.cpp's CPU route (builds with
// PTRAIN_HAVE_ONEDNN). Operands are CPU matrices with m, n, k > 0; a 2-D
// operand may be a transposed view, read in place.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace ptrain::model::onednn {

// a·b of float32 matrices → float32, through oneDNN's sgemm.
at::Tensor mm(const at::Tensor& a, const at::Tensor& b);

// Whether oneDNN has a bfloat16 matmul on this CPU: none below AVX-512 (or
// under ONEDNN_MAX_CPU_ISA=AVX2). Asked once per process; where it has none,
// LibTorch's own bf16 products are kept off oneDNN too.
bool has_bf16_matmul();

// a·b of bfloat16 matrices → float32, written as accumulated (not rounded to
// bfloat16), where has_bf16_matmul(). [..., m, k]·[..., k, n] for bmm, with
// contiguous operands of the same batch dimensions.
at::Tensor bf16_mm(const at::Tensor& a, const at::Tensor& b);
at::Tensor bf16_bmm(const at::Tensor& a, const at::Tensor& b);

// The same products where oneDNN has no bf16 matmul: the bfloat16 values
// widened to float32 and multiplied by oneDNN's float32 kernels, each row of
// `a` computed alike in any product (docs/devices.md).
at::Tensor widened_mm(const at::Tensor& a, const at::Tensor& b);
at::Tensor widened_bmm(const at::Tensor& a, const at::Tensor& b);

// "oneDNN 2.6.3".
std::string version();

}  // namespace ptrain::model::onednn
