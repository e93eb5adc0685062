// The SwiGLU MLP's activation, h = silu(gate) ⊙ up, and its gradients, as
// swiglu_mlp.h runs them under bf16-mixed: float32 gate and up (the
// products' results) in, bfloat16 out, the operand dtype the next products
// read.
//
// On CUDA each direction is one kernel (swiglu_activation.cu) that reads its
// inputs once and writes only the bfloat16 results. ATen's ops would take
// four passes back (a multiply, silu_backward and a cast, and the multiply
// for up's gradient), each writing float32, and keep silu(gate) from the
// forward. The kernels compute ATen's CUDA formulas in the same order
// (swiglu_activation_math.h) and round once, so they give the composition's
// values: tests/unit/test_swiglu_mlp.cpp checks that bit for bit on each
// device it finds, and tests/unit/test_swiglu_activation.cpp checks the
// formulas on the host.
//
// Other devices, and a build without CUDA, run that composition of ATen
// ops. Each call is one profiler event, ptrain::swiglu_activation or
// ptrain::swiglu_activation_backward, which the GPU-work audit
// (bench/gpu_audit.py) counts as the one kernel CUDA runs.
#pragma once

#include <ATen/core/Tensor.h>

namespace ptrain::model {

// gate, up: [N, I] float32 → silu(gate) ⊙ up, [N, I] bfloat16.
at::Tensor swiglu_activation(const at::Tensor& gate, const at::Tensor& up);

struct SwigluActivationGrads {
  at::Tensor gate;  // [N, I] bfloat16: silu'(gate) ⊙ grad_hidden ⊙ up
  at::Tensor up;    // [N, I] bfloat16: grad_hidden ⊙ silu(gate)
};

// grad_hidden, gate, up: [N, I] float32.
SwigluActivationGrads swiglu_activation_backward(const at::Tensor& grad_hidden, const at::Tensor& gate,
                                                 const at::Tensor& up);

}  // namespace ptrain::model
