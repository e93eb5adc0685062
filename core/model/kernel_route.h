// Which kernels the model's math takes for tensors on the CPU.
//
// The CPU route (the default) is the one measured fastest there: float32 and
// bf16 products on oneDNN (gemm.h), RMSNorm and rotary embeddings in the
// fused CPU kernels (fused_kernels.h), float32 attention kernels, and a loss
// head over the trained rows only, in chunks of about 4M logits
// (loss_head_chunks.h). The accelerator route is what tensors on any other
// device (CUDA) take: ATen's products, ATen's norms (PyTorch's fused RMSNorm
// on CUDA), ptrain's rotary kernel, bf16 attention kernels under bf16-mixed,
// and a loss head over every row in large chunks, with no size read back to
// the host.
//
// Routing the CPU onto the accelerator route runs the CUDA path's ATen ops
// (and, for ptrain's own CUDA kernels, their CPU twins) on CPU tensors: the
// GPU-work audit (bench/gpu_audit.py, docs/performance.md) profiles it that
// way on machines without a GPU. Training never sets it.
#pragma once

#include <ATen/core/Tensor.h>

namespace ptrain::model {

enum class CpuKernelRoute { kCpu, kAccelerator };

// Process-wide; set before the model runs (not while a forward is in flight).
void set_cpu_kernel_route(CpuKernelRoute route);
CpuKernelRoute cpu_kernel_route();

// `t` is on the CPU and the CPU route is in effect: the CPU's own kernels apply.
bool takes_cpu_kernels(const at::Tensor& t);

}  // namespace ptrain::model
