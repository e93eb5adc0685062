// The test suite's stand-in device (docs/devices.md): a LibTorch backend on
// the PrivateUse1 device type whose memory the host cannot read and whose
// operators check devices as CUDA's do, so that device bugs show on machines
// without a GPU. It is no user setting: the tests name its library in the
// environment, and runtime.device = "auto" then resolves to it.
//
//   PTRAIN_TEST_DEVICE=<path>/libptrain_standin_device.so
#pragma once

#include <c10/core/Device.h>

#include <optional>

namespace ptrain::train {

// The stand-in device when PTRAIN_TEST_DEVICE names its library, loading it
// on first use; nullopt when the variable is unset or empty. A library that
// does not load, or is not the stand-in, is an sdk::Error naming the variable.
std::optional<at::Device> stand_in_device();

}  // namespace ptrain::train
