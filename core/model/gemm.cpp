#include "core/model/gemm.h"

#include "core/model/kernel_route.h"
#include "core/model/onednn_gemm.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/version.h>

#include <string>
#include <vector>

namespace ptrain::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

bool onednn_applies(const at::Tensor& t) {
#ifdef PTRAIN_HAVE_ONEDNN
  return takes_cpu_kernels(t) && t.scalar_type() == at::kFloat;
#else
  (void)t;
  return false;
#endif
}

// Rounds to the operand dtype; a no-op for operands already in it.
at::Tensor as_operand(const at::Tensor& t, at::ScalarType operands) {
  return t.scalar_type() == operands ? t : t.to(operands);
}

// ATen's product of operands already in a low-precision dtype, as float32.
// LibTorch 2.8 added products that write the float32 accumulation as it is
// (aten::mm.dtype, CUDA only): not rounded to bfloat16 first, as with oneDNN
// on the CPU, so a row's product depends on its microbatch's shape only to
// float32 rounding. Elsewhere the bfloat16 result is widened.
at::Tensor aten_low_precision_mm(const at::Tensor& a, const at::Tensor& b) {
#ifdef PTRAIN_HAVE_ONEDNN
  if (!a.is_cuda()) onednn::has_bf16_matmul();  // settles which bf16 products ATen takes on a CPU
#endif
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 8)
  if (a.is_cuda()) return at::mm(a, b, at::kFloat);
#endif
  return at::mm(a, b).to(at::kFloat);
}

at::Tensor plain_mm(const at::Tensor& a, const at::Tensor& b, at::ScalarType operands) {
  if (operands != at::kFloat) {
    const at::Tensor a_operand = as_operand(a, operands), b_operand = as_operand(b, operands);
#ifdef PTRAIN_HAVE_ONEDNN
    if (takes_cpu_kernels(a) && takes_cpu_kernels(b) && a.size(0) > 0 && a.size(1) > 0 && b.size(1) > 0) {
      return onednn::has_bf16_matmul() ? onednn::bf16_mm(a_operand, b_operand)
                                       : onednn::widened_mm(a_operand, b_operand);
    }
#endif
    return aten_low_precision_mm(a_operand, b_operand);
  }
#ifdef PTRAIN_HAVE_ONEDNN
  if (a.size(0) > 0 && a.size(1) > 0 && b.size(1) > 0 && onednn_applies(a) && onednn_applies(b)) {
    return onednn::mm(a, b);
  }
#endif
  return at::mm(a, b);
}

// Saves the flattened input for the weight's gradient, as at::linear does,
// already rounded to the operand dtype (half the memory under bf16). The
// bias is added outside (autograd of LibTorch 1.13 takes no undefined input
// to a custom function).
struct LinearFunction : public torch::autograd::Function<LinearFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x2d, const at::Tensor& weight,
                            int64_t operand_type) {
    const auto operands = static_cast<at::ScalarType>(operand_type);
    const at::Tensor x_operand = as_operand(x2d, operands);
    const at::Tensor weight_operand = as_operand(weight, operands);
    ctx->save_for_backward({x_operand, weight_operand});
    ctx->saved_data["operands"] = operand_type;
    return plain_mm(x_operand, weight_operand.t(), operands);
  }

  // y = x·Wᵀ:  dx = dy·W,  dW = dyᵀ·x.
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const auto operands = static_cast<at::ScalarType>(ctx->saved_data["operands"].toInt());
    const at::Tensor grad_out = as_operand(grad_outputs[0], operands);
    at::Tensor grad_x, grad_weight;
    if (ctx->needs_input_grad(0)) grad_x = plain_mm(grad_out, saved[1], operands);
    if (ctx->needs_input_grad(1)) grad_weight = plain_mm(grad_out.t(), saved[0], operands);
    return {grad_x, grad_weight, at::Tensor()};
  }
};

// Batched products of bfloat16 operands with float32 results, and their
// backward through the same products: dA = dC·Bᵀ, dB = Aᵀ·dC.
struct Bf16BatchedMatmul : public torch::autograd::Function<Bf16BatchedMatmul> {
  static at::Tensor product(const at::Tensor& a, const at::Tensor& b) {
    const at::Tensor a_operand = as_operand(a, at::kBFloat16).contiguous();
    const at::Tensor b_operand = as_operand(b, at::kBFloat16).contiguous();
#ifdef PTRAIN_HAVE_ONEDNN
    if (takes_cpu_kernels(a) && a.numel() > 0 && b.numel() > 0) {
      return onednn::has_bf16_matmul() ? onednn::bf16_bmm(a_operand, b_operand)
                                       : onednn::widened_bmm(a_operand, b_operand);
    }
#endif
    return at::matmul(a_operand, b_operand).to(at::kFloat);
  }

  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b) {
    const at::Tensor a_operand = as_operand(a, at::kBFloat16), b_operand = as_operand(b, at::kBFloat16);
    ctx->save_for_backward({a_operand, b_operand});
    return product(a_operand, b_operand);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor grad = as_operand(grad_outputs[0], at::kBFloat16);
    at::Tensor grad_a, grad_b;
    if (ctx->needs_input_grad(0)) grad_a = product(grad, saved[1].transpose(-2, -1));
    if (ctx->needs_input_grad(1)) grad_b = product(saved[0].transpose(-2, -1), grad);
    return {grad_a, grad_b};
  }
};

}  // namespace

at::Tensor batched_matmul(const at::Tensor& a, const at::Tensor& b, at::ScalarType operands) {
  TORCH_CHECK(a.dim() >= 3 && a.dim() == b.dim() &&
                  a.sizes().slice(0, a.dim() - 2) == b.sizes().slice(0, b.dim() - 2) && a.size(-1) == b.size(-2),
              "batched_matmul: [..., m, k] and [..., k, n] with the same batch dimensions expected, got ", a.sizes(),
              " and ", b.sizes());
  TORCH_CHECK(operands == at::kFloat || operands == at::kBFloat16,
              "batched_matmul: operands must be float32 or bfloat16, got ", operands);
  if (operands == at::kFloat) return at::matmul(a, b);
  return Bf16BatchedMatmul::apply(a, b);
}

at::Tensor mm(const at::Tensor& a, const at::Tensor& b, at::ScalarType operands) {
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "mm: [m, k] and [k, n] expected, got ", a.sizes(),
              " and ", b.sizes());
  TORCH_CHECK(operands == at::kFloat || operands == at::kBFloat16, "mm: operands must be float32 or bfloat16, got ",
              operands);
  // A product autograd records keeps ATen's backward; the model's layers use linear.
  if (at::GradMode::is_enabled() && (a.requires_grad() || b.requires_grad())) {
    if (operands == at::kFloat) return at::mm(a, b);
    return at::mm(a.to(operands), b.to(operands)).to(at::kFloat);
  }
  return plain_mm(a, b, operands);
}

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, at::ScalarType operands) {
  TORCH_CHECK(x.dim() >= 1 && weight.dim() == 2 && x.size(-1) == weight.size(1),
              "linear: x [..., K] and weight [N, K] expected, got ", x.sizes(), " and ", weight.sizes());
  TORCH_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == weight.size(0)), "linear: bias [", weight.size(0),
              "] expected, got ", bias.sizes());
  TORCH_CHECK(operands == at::kFloat || operands == at::kBFloat16, "linear: operands must be float32 or bfloat16, got ",
              operands);
  const bool mixed = operands != at::kFloat && x.numel() > 0;
  const bool gemm_applies = mixed || (onednn_applies(x) && onednn_applies(weight) &&
                                      (!bias.defined() || onednn_applies(bias)) && x.numel() > 0);
  if (!gemm_applies) return at::linear(x, weight, bias);

  std::vector<int64_t> out_shape = x.sizes().vec();
  out_shape.back() = weight.size(0);
  const at::Tensor x2d = x.reshape({-1, x.size(-1)});
  const bool differentiable = at::GradMode::is_enabled() &&
                              (x.requires_grad() || weight.requires_grad() || (bias.defined() && bias.requires_grad()));
  if (!differentiable) {
    at::Tensor out = plain_mm(x2d, weight.t(), operands);
    if (bias.defined()) out.add_(bias);
    return out.view(out_shape);
  }
  const at::Tensor out = LinearFunction::apply(x2d, weight, static_cast<int64_t>(operands));
  return (bias.defined() ? out + bias : out).view(out_shape);
}

std::string bf16_gemm_route() {
#ifdef PTRAIN_HAVE_ONEDNN
  if (cpu_kernel_route() == CpuKernelRoute::kCpu) {
    return onednn::has_bf16_matmul() ? "oneDNN bf16 matmul"
                                     : "bf16 operands widened to fp32 (this CPU has no oneDNN bf16 matmul)";
  }
#endif
  return "ATen";
}

std::string gemm_backend() {
#ifdef PTRAIN_HAVE_ONEDNN
  return onednn::version();
#else
  return "ATen (system BLAS)";
#endif
}

}  // namespace ptrain::model
