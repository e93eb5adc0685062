#include "core/model/swiglu_mlp.h"

#include "core/model/gemm.h"
#include "core/model/swiglu_activation.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

namespace ptrain::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr at::ScalarType kOperands = at::kBFloat16;

struct SwiGluMlpFunction : public torch::autograd::Function<SwiGluMlpFunction> {
  // x2d: [N, H] → [N, H]
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x2d, const at::Tensor& gate_weight,
                            const at::Tensor& up_weight, const at::Tensor& down_weight) {
    const at::Tensor x = x2d.to(kOperands);  // once for both products
    const at::Tensor gate_w = gate_weight.to(kOperands), up_w = up_weight.to(kOperands);
    const at::Tensor down_w = down_weight.to(kOperands);
    const at::Tensor gate = model::mm(x, gate_w.t(), kOperands);  // [N, I] float32
    const at::Tensor up = model::mm(x, up_w.t(), kOperands);      // [N, I] float32
    const at::Tensor hidden = swiglu_activation(gate, up);        // [N, I] bfloat16, as the down product reads it
    ctx->save_for_backward({x, gate_w, up_w, down_w, gate, up, hidden});
    return model::mm(hidden, down_w.t(), kOperands);
  }

  // y = h·Wdᵀ, h = silu(g) ⊙ u, g = x·Wgᵀ, u = x·Wuᵀ:
  //   dh = dy·Wd,  du = dh ⊙ silu(g),  dg = silu'(g) ⊙ dh ⊙ u,
  //   dx = dg·Wg + du·Wu,  dWd = dyᵀ·h,  dWg = dgᵀ·x,  dWu = duᵀ·x.
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &gate_w = saved[1], &up_w = saved[2], &down_w = saved[3];
    const at::Tensor &gate = saved[4], &up = saved[5], &hidden = saved[6];
    const at::Tensor grad_y = grad_outputs[0].to(kOperands);
    at::Tensor grad_x, grad_gate_w, grad_up_w, grad_down_w;
    if (ctx->needs_input_grad(3)) grad_down_w = model::mm(grad_y.t(), hidden, kOperands);
    const at::Tensor grad_hidden = model::mm(grad_y, down_w, kOperands);                  // [N, I] float32
    const auto [grad_gate, grad_up] = swiglu_activation_backward(grad_hidden, gate, up);  // [N, I] bfloat16
    if (ctx->needs_input_grad(0)) {
      grad_x = model::mm(grad_gate, gate_w, kOperands).add_(model::mm(grad_up, up_w, kOperands));
    }
    if (ctx->needs_input_grad(1)) grad_gate_w = model::mm(grad_gate.t(), x, kOperands);
    if (ctx->needs_input_grad(2)) grad_up_w = model::mm(grad_up.t(), x, kOperands);
    return {grad_x, grad_gate_w, grad_up_w, grad_down_w};
  }
};

}  // namespace

at::Tensor swiglu_mlp_bf16(const at::Tensor& x, const at::Tensor& gate_weight, const at::Tensor& up_weight,
                           const at::Tensor& down_weight) {
  const int64_t hidden_size = x.size(-1), intermediate = gate_weight.size(0);
  TORCH_CHECK(gate_weight.dim() == 2 && gate_weight.size(1) == hidden_size &&
                  up_weight.sizes() == gate_weight.sizes() && down_weight.dim() == 2 &&
                  down_weight.size(0) == hidden_size && down_weight.size(1) == intermediate,
              "swiglu_mlp_bf16: x [..., H], gate and up [I, H], down [H, I] expected, got ", x.sizes(), ", ",
              gate_weight.sizes(), ", ", up_weight.sizes(), " and ", down_weight.sizes());
  return SwiGluMlpFunction::apply(x.reshape({-1, hidden_size}), gate_weight, up_weight, down_weight)  // [N, H]
      .view(x.sizes());
}

}  // namespace ptrain::model
