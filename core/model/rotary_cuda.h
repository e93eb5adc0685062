// The CUDA kernel of fused::rotary (fused_kernels.h), declared with raw
// pointers so that only rotary.cu includes CUDA's headers. It launches on
// `stream` (a cudaStream_t) and returns nullptr, or the CUDA error's text.
#pragma once

#include "core/model/rotary_math.h"

#include <cstdint>

namespace ptrain::model::rotary_cuda {

// The rotary map (adjoint: its transpose) over `tokens` tokens' heads, laid out as `layout` says.
const char* launch_rotary(const float* in, float* out, const float* cos, const float* sin, int64_t tokens,
                          rotary_math::Layout layout, float scale, bool adjoint, void* stream);

}  // namespace ptrain::model::rotary_cuda
