// What the model's CUDA kernels (swiglu_activation.cu, rotary.cu) share for
// their launches: a grid-stride loop's block count, and the launch's error.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace ptrain::model::cuda_launch {

constexpr int kThreads = 256;
// Enough blocks to fill any GPU; the kernels' loops stride over the rest.
constexpr int64_t kMaxBlocks = int64_t{1} << 16;

inline int blocks_for(int64_t count) {
  return static_cast<int>(std::min((count + kThreads - 1) / kThreads, kMaxBlocks));
}

// nullptr, or the text of the error the last launch left.
inline const char* last_error() {
  const cudaError_t error = cudaGetLastError();
  return error == cudaSuccess ? nullptr : cudaGetErrorString(error);
}

}  // namespace ptrain::model::cuda_launch
