#include "core/train/compute_device.h"

#include "core/config/core_sections.h"
#include "core/model/gemm.h"
#include "core/train/cpu_kernels.h"
#include "core/train/stand_in_device.h"
#include "ptrain/sdk/errors.h"

#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>

namespace ptrain::train {
namespace {

int visible_gpus() { return at::hasCUDA() ? at::detail::getCUDAHooks().getNumGPUs() : 0; }

std::string device_key_error(const config::RunConfig& config, const std::string& why) {
  return config.source.string() + ": runtime.device = \"cuda\": " + why +
         "; set runtime.device = \"auto\" or \"cpu\" to run on the CPU";
}

// The CPU, or for a one-process run the test suite's stand-in device when
// the tests name it (stand_in_device.h); several ranks stay on the CPU, as
// they do on a one-GPU machine.
at::Device host_or_stand_in(int local_world_size) {
  if (local_world_size == 1) {
    if (const std::optional<at::Device> stand_in = stand_in_device()) return *stand_in;
  }
  return at::kCPU;
}

}  // namespace

bool cuda_usable() { return visible_gpus() > 0; }

at::Device resolve_device(const config::RunConfig& config, int local_rank, int local_world_size) {
  switch (config.runtime.device) {
    case config::DeviceChoice::kCpu:
      return at::kCPU;
    case config::DeviceChoice::kAuto:
      // Every process of the node decides alike: a GPU each, or all on the CPU
      // (one backend for the whole job; two ranks cannot share a GPU under NCCL).
      if (!cuda_usable() || local_world_size > visible_gpus()) return host_or_stand_in(local_world_size);
      break;
    case config::DeviceChoice::kCuda:
      if (!at::hasCUDA()) {
        throw sdk::ConfigError(device_key_error(config,
                                                "this ptrain was built against a LibTorch without CUDA "
                                                "(scripts/build-gpu.sh builds one with it)"));
      }
      if (visible_gpus() == 0) {
        throw sdk::ConfigError(device_key_error(config,
                                                "no CUDA GPU is visible (check nvidia-smi and "
                                                "CUDA_VISIBLE_DEVICES)"));
      }
      break;
  }
  if (local_rank >= visible_gpus()) {
    throw sdk::ConfigError(device_key_error(config, "LOCAL_RANK " + std::to_string(local_rank) +
                                                        " has no GPU of its own (" + std::to_string(visible_gpus()) +
                                                        " visible): start at most that many processes per node"));
  }
  return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(local_rank));
}

at::ScalarType compute_dtype(config::Precision precision) {
  return precision == config::Precision::kBf16Mixed ? at::kBFloat16 : at::kFloat;
}

std::string describe_compute(at::Device device, config::Precision precision) {
  std::string text = device.str() + (device.is_cpu() ? " (" + describe_cpu_kernels() + ")" : "") + ", " +
                     config::precision_name(precision);
  // The CPU's bf16 products take one of two routes (gemm.h), by what the CPU has.
  if (precision == config::Precision::kBf16Mixed && device.is_cpu()) text += " (" + model::bf16_gemm_route() + ")";
  return text;
}

}  // namespace ptrain::train
