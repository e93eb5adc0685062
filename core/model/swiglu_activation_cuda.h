// The CUDA kernels of swiglu_activation.h, declared with raw pointers so that
// only swiglu_activation.cu includes CUDA's headers and only
// swiglu_activation.cpp includes ATen's. Each launches on `stream` (a
// cudaStream_t) and returns nullptr, or the CUDA error's text.
#pragma once

#include <cstdint>

namespace ptrain::model::swiglu_cuda {

// hidden[i] = bf16(silu(gate[i]) · up[i]); bfloat16 results as raw 16-bit words.
const char* launch_activation(const float* gate, const float* up, uint16_t* hidden, int64_t count, void* stream);

// grad_gate[i] = bf16(silu'(gate[i]) · grad_hidden[i] · up[i]), grad_up[i] = bf16(grad_hidden[i] · silu(gate[i])).
const char* launch_activation_backward(const float* grad_hidden, const float* gate, const float* up,
                                       uint16_t* grad_gate, uint16_t* grad_up, int64_t count, void* stream);

}  // namespace ptrain::model::swiglu_cuda
