// Matrix products of the model's dense layers, through oneDNN's GEMM on CPU.
//
// LibTorch's at::mm on CPU calls the system BLAS, whose kernels are whatever
// the BLAS build (or OPENBLAS_CORETYPE) fixed; oneDNN, which Debian's
// LibTorch already links, picks its kernels by the CPU it finds at run time
// (DNNL_MAX_CPU_ISA caps them). On this project's machines that is AVX-512
// against the environment's AVX2 OpenBLAS, about twice the throughput on the
// model's products (docs/performance.md has the measurements).
//
// Float32 CPU tensors take oneDNN when the build has it (PTRAIN_ONEDNN, on
// by default) and the CPU route is in effect (kernel_route.h); everything
// else, and every other device and dtype, takes the ATen call, which
// computes the same product.
//
// `operands` = at::kBFloat16 is bf16-mixed precision: float32 tensors in and
// out, the product of their bfloat16 roundings accumulated in float32. On
// the CPU, oneDNN's matmul writes that float32 result as it is (AVX512-BF16
// or AMX kernels where the CPU has them), so a row's product does not depend
// on the other rows of its microbatch and bf16-mixed keeps split invariance
// to float32 rounding. On CUDA with LibTorch >= 2.8, ATen's product writes
// its float32 result the same way (aten::mm.dtype). Elsewhere (older CUDA
// LibTorch, builds without oneDNN, the accelerator route of kernel_route.h)
// ATen computes it and rounds the result to bfloat16 before widening it, as
// autocast does.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace ptrain::model {

// a [m, k] · b [k, n] → [m, n], as at::mm. Either operand may be a transposed
// view (a.t() of a contiguous matrix): it is read in place, not copied.
at::Tensor mm(const at::Tensor& a, const at::Tensor& b, at::ScalarType operands = at::kFloat);

// x · weightᵀ + bias over the last dimension of x, as at::linear, with its
// own backward of two products through mm. x: [..., K], weight: [N, K],
// bias: [N] or undefined → [..., N]. Under bf16 operands the backward's
// products read bfloat16 too, and the saved input is kept in bfloat16.
at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias = {},
                  at::ScalarType operands = at::kFloat);

// a [..., m, k] · b [..., k, n] → [..., m, n] over the same batch
// dimensions, as at::matmul; differentiable. float32 operands take
// at::matmul itself; bfloat16 ones the products above, float32 results.
at::Tensor batched_matmul(const at::Tensor& a, const at::Tensor& b, at::ScalarType operands = at::kFloat);

// How the CPU route computes products of bf16 operands, chosen once per
// process: "oneDNN bf16 matmul" where oneDNN has bfloat16 kernels (AVX-512),
// else the bf16 values widened to fp32 and multiplied by the fp32 GEMM (the
// same arithmetic in another order); "ATen" on the accelerator route or
// without oneDNN. For the [train] line.
std::string bf16_gemm_route();

// The name of the GEMM that mm uses for float32 CPU tensors ("oneDNN 2.6.3"
// or "ATen (system BLAS)"), for logs and the benchmark table.
std::string gemm_backend();

}  // namespace ptrain::model
