// PTRAIN_HOST_DEVICE marks a function that both the host compiler and nvcc
// compile: element math shared by a CPU loop and a CUDA kernel, so that the
// CPU's tests check what the GPU computes (swiglu_activation_math.h, rotary_math.h).
#pragma once

#if defined(__CUDACC__)
#define PTRAIN_HOST_DEVICE __host__ __device__
#else
#define PTRAIN_HOST_DEVICE
#endif
