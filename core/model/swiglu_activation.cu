// One pass each way for the SwiGLU activation on CUDA (swiglu_activation.h):
// float32 in, bfloat16 out, rounded to nearest even as ATen's casts round.
#include "core/model/cuda_launch.cuh"
#include "core/model/swiglu_activation_cuda.h"
#include "core/model/swiglu_activation_math.h"

#include <cuda_bf16.h>

namespace ptrain::model::swiglu_cuda {
namespace {

using cuda_launch::blocks_for;
using cuda_launch::kThreads;

__device__ uint16_t to_bf16_bits(float value) { return __bfloat16_as_ushort(__float2bfloat16_rn(value)); }

__global__ void activation_kernel(const float* __restrict__ gate, const float* __restrict__ up,
                                  uint16_t* __restrict__ hidden, int64_t count) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    hidden[i] = to_bf16_bits(swiglu_math::activation(gate[i], up[i]));
  }
}

__global__ void activation_backward_kernel(const float* __restrict__ grad_hidden, const float* __restrict__ gate,
                                           const float* __restrict__ up, uint16_t* __restrict__ grad_gate,
                                           uint16_t* __restrict__ grad_up, int64_t count) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const float dh = grad_hidden[i], g = gate[i];
    grad_up[i] = to_bf16_bits(swiglu_math::up_gradient(dh, g));
    grad_gate[i] = to_bf16_bits(swiglu_math::gate_gradient(dh, g, up[i]));
  }
}

}  // namespace

const char* launch_activation(const float* gate, const float* up, uint16_t* hidden, int64_t count, void* stream) {
  if (count == 0) return nullptr;
  activation_kernel<<<blocks_for(count), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(gate, up, hidden, count);
  return cuda_launch::last_error();
}

const char* launch_activation_backward(const float* grad_hidden, const float* gate, const float* up,
                                       uint16_t* grad_gate, uint16_t* grad_up, int64_t count, void* stream) {
  if (count == 0) return nullptr;
  activation_backward_kernel<<<blocks_for(count), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      grad_hidden, gate, up, grad_gate, grad_up, count);
  return cuda_launch::last_error();
}

}  // namespace ptrain::model::swiglu_cuda
