// The decoder's MLP, down(silu(gate(x)) ⊙ up(x)), as one autograd function
// for bf16-mixed: the same products and roundings as its three
// model::linear calls and ATen's silu and multiply (gemm.h), with fewer
// passes over the [tokens, intermediate] tensors, the widest a layer has.
//
// Apart, the three linears meet the elementwise ops in float32: the forward
// writes silu(gate) ⊙ up in float32 and the down product then rounds it to
// bfloat16 (another pass), and the backward writes up's gradient in float32
// for its product to round. Here both are written once, straight into
// bfloat16 (rounding its float32 result once, as the cast did), and x is
// rounded once for both products instead of once each. On CUDA the
// activation and its gradients are one kernel each way
// (swiglu_activation.h). Values and gradients are bit for bit the
// composition's (tests/unit/test_swiglu_mlp.cpp), with less elementwise
// traffic (bench/gpu_audit.py's activation bytes). Saved for the backward:
// x in bfloat16, gate and up in float32 and the product in bfloat16, one
// bfloat16 copy of x fewer than the composition keeps and no silu(gate).
#pragma once

#include <ATen/core/Tensor.h>

namespace ptrain::model {

// x: [..., H] float32; gate_weight, up_weight: [I, H]; down_weight: [H, I]
// (float32, read as bfloat16) → [..., H] float32. Differentiable in all four.
at::Tensor swiglu_mlp_bf16(const at::Tensor& x, const at::Tensor& gate_weight, const at::Tensor& up_weight,
                           const at::Tensor& down_weight);

}  // namespace ptrain::model
