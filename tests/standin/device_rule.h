// CUDA's rule for an operator's tensors, applied on the stand-in device
// before an operator falls back to its CPU kernel: all on one device, except
// that a 0-dim host tensor may stand for a number (TensorIterator's "CPU
// scalar") and an index operator may take host indices. The fallback itself
// would run anything on the CPU, so without this a host tensor meeting a
// device tensor would pass here and fail only on a GPU.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace ptrain::standin {

// Throws c10::Error, worded as CUDA's, when a host tensor of one or more
// dimensions meets a stand-in tensor in `op`'s arguments. Replaces the 0-dim
// host tensors it lets through with copies on the device, so results land
// there as they would on a GPU.
void apply_device_rule(const c10::OperatorHandle& op, torch::jit::Stack& stack);

}  // namespace ptrain::standin
