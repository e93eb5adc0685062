// The start of a multi-process job: rank 0 serves a c10d TCPStore at
// MASTER_ADDR:MASTER_PORT, every rank connects to it, and they meet there
// before any process group exists, all within distributed.timeout_s of this
// rank's start. Meeting first lets a rank that is absent, that counts
// another world size, or that claims a rank another process holds be named
// at once, where a process group would only time out.
#pragma once

#include "core/dist/launch_env.h"

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <string>

namespace ptrain::dist {

// Connects (rank 0: serves and connects) and waits until every rank has
// arrived. Throws sdk::Error naming the address and the ranks that did not
// arrive within `timeout`; that rank 0 cannot be reached; the rank whose
// world size differs from rank 0's (every node's launcher must be given the
// same --nproc and --nnodes); or two processes claiming one rank. A rank
// that finds a disagreement leaves its words in the store, so that every
// rank stops with them, not after the timeout.
c10::intrusive_ptr<c10d::Store> rendezvous(const LaunchEnv& launch, std::chrono::seconds timeout);

// What a store that no longer answers tells a rank after a failure: its
// server is gone. That is rank 0, or under torchrun's agent store the agent
// on MASTER_ADDR's node (rank 0 may be alive and well).
std::string store_gone_message(const LaunchEnv& launch);

}  // namespace ptrain::dist
