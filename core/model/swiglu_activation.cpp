#include "core/model/swiglu_activation.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>

#ifdef PTRAIN_WITH_CUDA
#include "core/model/swiglu_activation_cuda.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace ptrain::model {
namespace {

constexpr at::ScalarType kOutputDtype = at::kBFloat16;

void check_inputs(const char* op, std::initializer_list<const at::Tensor*> inputs) {
  const at::Tensor& first = **inputs.begin();
  for (const at::Tensor* t : inputs) {
    TORCH_CHECK(t->scalar_type() == at::kFloat && t->sizes() == first.sizes() && t->device() == first.device(), op,
                ": float32 tensors of one shape on one device expected, got ", t->scalar_type(), " ", t->sizes(),
                " on ", t->device(), " beside ", first.sizes(), " on ", first.device());
  }
}

at::Tensor empty_operands(const at::Tensor& like) {
  return at::empty(like.sizes(), like.options().dtype(kOutputDtype));
}

#ifdef PTRAIN_WITH_CUDA
uint16_t* bf16_words(at::Tensor& t) { return reinterpret_cast<uint16_t*>(t.data_ptr<at::BFloat16>()); }

void check_launch(const char* op, const char* error) { TORCH_CHECK(error == nullptr, op, ": CUDA kernel: ", error); }
#endif

}  // namespace

at::Tensor swiglu_activation(const at::Tensor& gate, const at::Tensor& up) {
  RECORD_FUNCTION("ptrain::swiglu_activation", std::vector<c10::IValue>({gate, up}));
  check_inputs("swiglu_activation", {&gate, &up});
  at::Tensor hidden = empty_operands(gate);
#ifdef PTRAIN_WITH_CUDA
  if (gate.is_cuda()) {
    const c10::cuda::CUDAGuard guard(gate.device());
    const at::Tensor g = gate.contiguous(), u = up.contiguous();
    check_launch("swiglu_activation",
                 swiglu_cuda::launch_activation(g.data_ptr<float>(), u.data_ptr<float>(), bf16_words(hidden), g.numel(),
                                                c10::cuda::getCurrentCUDAStream().stream()));
    return hidden;
  }
#endif
  // A multiply into bfloat16 computes in float32 and rounds once as it stores.
  return at::mul_out(hidden, at::silu(gate), up);
}

SwigluActivationGrads swiglu_activation_backward(const at::Tensor& grad_hidden, const at::Tensor& gate,
                                                 const at::Tensor& up) {
  RECORD_FUNCTION("ptrain::swiglu_activation_backward", std::vector<c10::IValue>({grad_hidden, gate, up}));
  check_inputs("swiglu_activation_backward", {&grad_hidden, &gate, &up});
  SwigluActivationGrads grads{empty_operands(gate), empty_operands(gate)};
#ifdef PTRAIN_WITH_CUDA
  if (gate.is_cuda()) {
    const c10::cuda::CUDAGuard guard(gate.device());
    const at::Tensor dh = grad_hidden.contiguous(), g = gate.contiguous(), u = up.contiguous();
    check_launch("swiglu_activation_backward",
                 swiglu_cuda::launch_activation_backward(dh.data_ptr<float>(), g.data_ptr<float>(), u.data_ptr<float>(),
                                                         bf16_words(grads.gate), bf16_words(grads.up), g.numel(),
                                                         c10::cuda::getCurrentCUDAStream().stream()));
    return grads;
  }
#endif
  at::mul_out(grads.up, grad_hidden, at::silu(gate));
  // Not silu_backward_out into bfloat16: ATen's kernel computes in its
  // output's dtype, so it would round its inputs first.
  grads.gate.copy_(at::silu_backward(grad_hidden * up, gate));
  return grads;
}

}  // namespace ptrain::model
