// The c10d API differences between the LibTorch versions ptrain builds
// against (tested: 1.13 on Debian bookworm, 2.6 on trixie), kept here so the
// communicator reads the same on all of them.
#pragma once

#include <torch/version.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#define PTRAIN_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace ptrain::dist::c10d_compat {

// LibTorch 2.0 split ProcessGroup into a dispatcher over per-device
// Backends: ProcessGroupGloo and ProcessGroupNCCL became Backends. Both
// declare the collectives the communicator calls.
#if PTRAIN_TORCH_AT_LEAST(2, 0)
using CollectiveGroup = c10d::Backend;
#else
using CollectiveGroup = c10d::ProcessGroup;
#endif

// Gloo has reduce_scatter_tensor and all_gather_into_tensor
// (_reduce_scatter_base, _allgather_base) in LibTorch 2.6; 1.13's throws
// "does not support" for both, so the communicator emulates them there with
// an all-reduce. NCCL has them on every version.
inline constexpr bool kGlooHasTensorCollectives = PTRAIN_TORCH_AT_LEAST(2, 6);

// Store options with ptrain's defaults on every version.
inline c10d::TCPStoreOptions store_options() {
  c10d::TCPStoreOptions options;
#if PTRAIN_TORCH_AT_LEAST(2, 4)
  // LibTorch 2.4 made the libuv store backend the default, and a LibTorch
  // built without libuv (Debian's) then throws "use_libuv was requested but
  // PyTorch was build without libuv support" at the first rendezvous. The
  // classic backend exists in every version and serves a handful of ranks.
  options.useLibUV = false;
#endif
  return options;
}

}  // namespace ptrain::dist::c10d_compat

#undef PTRAIN_TORCH_AT_LEAST
