// What the kernel tests (fused kernels, GEMM, kernel routes) share: an error
// measure against a float64 reference, a scoped intra-op thread count, a
// scoped kernel route, and the devices to run on.
#pragma once

#include "core/model/kernel_route.h"
#include "core/train/compute_device.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <vector>

namespace ptrain::test {

// max |actual − expected| / max |expected|, in float64.
inline double max_relative_error(const at::Tensor& actual, const at::Tensor& expected) {
  return ((actual.to(at::kDouble) - expected).abs().max() / expected.abs().max().clamp_min(1e-30)).item<double>();
}

// Sets the intra-op thread count for a scope, and restores it after.
struct ThreadCount {
  int saved = at::get_num_threads();
  explicit ThreadCount(int n) { at::set_num_threads(n); }
  ~ThreadCount() { at::set_num_threads(saved); }
};

// Routes CPU tensors onto `route` for a scope, and back to the CPU route after.
struct KernelRouteScope {
  explicit KernelRouteScope(model::CpuKernelRoute route) { model::set_cpu_kernel_route(route); }
  ~KernelRouteScope() { model::set_cpu_kernel_route(model::CpuKernelRoute::kCpu); }
};

// The devices this machine computes on: the CPU, and the first GPU where one
// is visible (a CUDA build on a GPU machine: scripts/gpu-proof.sh's test phase).
inline std::vector<at::Device> devices_here() {
  std::vector<at::Device> devices{at::kCPU};
  if (train::cuda_usable()) devices.emplace_back(at::kCUDA, 0);
  return devices;
}

}  // namespace ptrain::test
