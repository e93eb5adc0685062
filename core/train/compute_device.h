// runtime.device and runtime.precision resolved against this LibTorch build
// and this machine (docs/devices.md#runtimedevice): the device a rank computes on and the
// dtype its matrix products read.
#pragma once

#include "core/config/run_config.h"

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <string>

namespace ptrain::train {

// LibTorch was built with CUDA and at least one GPU is visible.
bool cuda_usable();

// cpu: the CPU. cuda: cuda:local_rank, or sdk::ConfigError naming the config
// file and runtime.device when the build has no CUDA, no GPU is visible, or
// local_rank has no GPU of its own. auto: cuda:local_rank when every one of
// the node's local_world_size processes has a GPU of its own, else the CPU
// (or, in the tests, the stand-in device of stand_in_device.h).
at::Device resolve_device(const config::RunConfig& config, int local_rank, int local_world_size = 1);

// float32 for fp32, bfloat16 for bf16-mixed.
at::ScalarType compute_dtype(config::Precision precision);

// "cpu (native kernels: AVX-512), fp32" or "cuda:0, bf16-mixed"; on the CPU
// under bf16-mixed also the route its products take (model::bf16_gemm_route):
// for logs and `ptrain validate`.
std::string describe_compute(at::Device device, config::Precision precision);

}  // namespace ptrain::train
