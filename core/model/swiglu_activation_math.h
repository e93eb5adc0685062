// The elementwise math of the SwiGLU activation, per float32 element, shared
// by the CUDA kernels (swiglu_activation.cu) and the host, where
// tests/unit/test_swiglu_activation.cpp checks it. The formulas and their
// order of operations are ATen's CUDA silu and silu_backward kernels', so
// the kernels round exactly where the composition of those ops does.
#pragma once

#include "core/model/host_device.h"

#include <math.h>

namespace ptrain::model::swiglu_math {

// silu(g) = g / (1 + e^−g)
PTRAIN_HOST_DEVICE inline float silu(float g) { return g / (1.0f + expf(-g)); }

// dy · silu'(g) = dy · s · (1 + g · (1 − s)),  s = 1 / (1 + e^−g)
PTRAIN_HOST_DEVICE inline float silu_backward(float dy, float g) {
  const float s = 1.0f / (1.0f + expf(-g));
  return dy * s * (1.0f + g * (1.0f - s));
}

// h = silu(g) ⊙ u
PTRAIN_HOST_DEVICE inline float activation(float g, float u) { return silu(g) * u; }

// With dh the gradient of h:  du = dh ⊙ silu(g),  dg = silu'(g) ⊙ (dh ⊙ u).
PTRAIN_HOST_DEVICE inline float up_gradient(float dh, float g) { return dh * silu(g); }
PTRAIN_HOST_DEVICE inline float gate_gradient(float dh, float g, float u) { return silu_backward(dh * u, g); }

}  // namespace ptrain::model::swiglu_math
