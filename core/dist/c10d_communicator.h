// A Communicator on torch.distributed's c10d: ProcessGroupGloo on CPU (and
// ProcessGroupNCCL in builds with PTRAIN_WITH_CUDA), rendezvous through a
// TCPStore served by rank 0 at MASTER_ADDR:MASTER_PORT, or by torchrun's
// agent (LaunchEnv::agent_store_prefix).
#pragma once

#include "core/dist/communicator.h"
#include "core/dist/launch_env.h"

#include <c10/core/Device.h>

#include <chrono>
#include <memory>

namespace ptrain::dist {

// World size 1 needs no store: it returns the single-process communicator,
// unless PTRAIN_TEST_PROCESS_GROUP=1 asks for the process group anyway (so
// one GPU runs NCCL's code: scripts/gpu-proof.sh's nccl phase).
// `device` is where the rank computes: NCCL for a CUDA device (builds with
// PTRAIN_WITH_CUDA), Gloo for the CPU. Throws sdk::Error naming the address
// when the rendezvous fails or times out.
std::unique_ptr<Communicator> make_communicator(const LaunchEnv& launch, std::chrono::seconds timeout,
                                                at::Device device = at::kCPU);

}  // namespace ptrain::dist
