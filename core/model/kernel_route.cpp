#include "core/model/kernel_route.h"

#include "core/model/gemm.h"

#include <atomic>

namespace ptrain::model {
namespace {

std::atomic<CpuKernelRoute> route{CpuKernelRoute::kCpu};

}  // namespace

void set_cpu_kernel_route(CpuKernelRoute new_route) {
  // The accelerator route runs ATen's bf16 products on CPU tensors: settle
  // first which ones this CPU has (gemm.h).
  if (new_route == CpuKernelRoute::kAccelerator) bf16_gemm_route();
  route.store(new_route, std::memory_order_relaxed);
}

CpuKernelRoute cpu_kernel_route() { return route.load(std::memory_order_relaxed); }

bool takes_cpu_kernels(const at::Tensor& t) {
  return t.device().is_cpu() && route.load(std::memory_order_relaxed) == CpuKernelRoute::kCpu;
}

}  // namespace ptrain::model
