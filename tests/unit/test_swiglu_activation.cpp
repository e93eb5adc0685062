// The SwiGLU activation's kernels (core/model/swiglu_activation.h): their
// per-element formulas, computed on the host, against ATen's silu and
// silu_backward and against float64; the public functions against float64
// autograd on every device here; and on a GPU, the CUDA kernels against
// ATen's composition there, bit for bit.

#include "catch.h"

#include "core/model/swiglu_activation.h"
#include "core/model/swiglu_activation_math.h"
#include "kernel_test_support.h"

#include <ATen/ATen.h>

#include <functional>

namespace {

namespace math = ptrain::model::swiglu_math;

// gate spans silu's regions (saturated both ways, the minimum near −1.28); up and grad_hidden are moderate.
struct Inputs {
  at::Tensor gate = 4.0 * at::randn({37, 53});
  at::Tensor up = at::randn({37, 53});
  at::Tensor grad_hidden = at::randn({37, 53});
};

// f applied element by element on the host, in float32.
at::Tensor on_host(const std::vector<at::Tensor>& inputs, const std::function<float(const float*)>& f) {
  at::Tensor out = at::empty_like(inputs[0]);
  std::vector<const float*> data;
  for (const at::Tensor& t : inputs) data.push_back(t.data_ptr<float>());
  float* out_data = out.data_ptr<float>();
  for (int64_t i = 0; i < out.numel(); ++i) {
    float args[3];
    for (size_t k = 0; k < data.size(); ++k) args[k] = data[k][i];
    out_data[i] = f(args);
  }
  return out;
}

// How many bfloat16 steps apart two tensors' bf16 roundings are, at most (bf16 bits, same sign).
int64_t max_bf16_steps(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor bits_a = a.to(at::kBFloat16).view(at::kShort).to(at::kLong);
  const at::Tensor bits_b = b.to(at::kBFloat16).view(at::kShort).to(at::kLong);
  return (bits_a - bits_b).abs().max().item<int64_t>();
}

}  // namespace

TEST_CASE("the SwiGLU kernels' formulas give ATen's silu and silu_backward values", "[model][mlp]") {
  at::manual_seed(5);
  const Inputs in;
  const at::Tensor hidden = on_host({in.gate, in.up}, [](const float* v) { return math::activation(v[0], v[1]); });
  const at::Tensor grad_up =
      on_host({in.grad_hidden, in.gate}, [](const float* v) { return math::up_gradient(v[0], v[1]); });
  const at::Tensor grad_gate =
      on_host({in.grad_hidden, in.gate, in.up}, [](const float* v) { return math::gate_gradient(v[0], v[1], v[2]); });

  SECTION("against ATen's ops in float32: the same up to exp's last bit") {
    // The host's expf and ATen's vectorised exp may differ in the last bit;
    // CUDA's kernels and ATen's share one expf (test_swiglu_mlp.cpp checks them there).
    const at::Tensor silu = at::silu(in.gate);
    CHECK(at::allclose(hidden, silu * in.up, 1e-6, 1e-30));
    CHECK(at::allclose(grad_up, in.grad_hidden * silu, 1e-6, 1e-30));
    CHECK(at::allclose(grad_gate, at::silu_backward(in.grad_hidden * in.up, in.gate), 1e-6, 1e-7));
    CHECK(max_bf16_steps(hidden, silu * in.up) <= 1);
    CHECK(max_bf16_steps(grad_gate, at::silu_backward(in.grad_hidden * in.up, in.gate)) <= 1);
  }
  SECTION("against float64's closed forms") {
    const at::Tensor g = in.gate.to(at::kDouble), u = in.up.to(at::kDouble), dh = in.grad_hidden.to(at::kDouble);
    const at::Tensor s = at::sigmoid(g);
    CHECK(ptrain::test::max_relative_error(hidden, g * s * u) < 1e-6);
    CHECK(ptrain::test::max_relative_error(grad_up, dh * g * s) < 1e-6);
    CHECK(ptrain::test::max_relative_error(grad_gate, dh * u * (s + g * s * (1 - s))) < 1e-6);
  }
}

TEST_CASE("swiglu_activation and its backward give silu(gate) ⊙ up and its gradients in bfloat16", "[model][mlp]") {
  at::manual_seed(6);
  const Inputs in;
  // float64 autograd through silu(g) ⊙ u.
  const at::Tensor g = in.gate.to(at::kDouble).requires_grad_(true), u = in.up.to(at::kDouble).requires_grad_(true);
  const at::Tensor expected = at::silu(g) * u;
  expected.backward(in.grad_hidden.to(at::kDouble));
  for (const at::Device device : ptrain::test::devices_here()) {
    INFO("on " << device);
    const at::Tensor gate = in.gate.to(device), up = in.up.to(device), grad_hidden = in.grad_hidden.to(device);
    const at::Tensor hidden = ptrain::model::swiglu_activation(gate, up);
    const auto [grad_gate, grad_up] = ptrain::model::swiglu_activation_backward(grad_hidden, gate, up);
    for (const at::Tensor* t : {&hidden, &grad_gate, &grad_up}) {
      CHECK(t->scalar_type() == at::kBFloat16);
      CHECK(t->device() == device);
      CHECK(t->sizes() == in.gate.sizes());
    }
    // One rounding to bfloat16: within half a step (at most 2^-8 relative) of float64; silu'(g)'s float32
    // cancellation near its zero (g ≈ −1.28) costs the gate's gradient up to 1e-6 more.
    const auto within_rounding = [](const at::Tensor& actual, const at::Tensor& exact, double margin) {
      const at::Tensor a = actual.cpu().to(at::kDouble), e = exact.detach();
      return ((a - e).abs() <= e.abs() * (1.0 / 256) * 1.0001 + margin).all().item<bool>();
    };
    CHECK(within_rounding(hidden, expected, 1e-30));
    CHECK(within_rounding(grad_up, u.grad(), 1e-30));
    CHECK(within_rounding(grad_gate, g.grad(), 1e-6));
    if (device.is_cuda()) {  // the kernels against ATen's composition on the GPU: the same formulas, bit for bit
      const at::Tensor silu = at::silu(gate);
      CHECK(at::equal(hidden, (silu * up).to(at::kBFloat16)));
      CHECK(at::equal(grad_up, (grad_hidden * silu).to(at::kBFloat16)));
      CHECK(at::equal(grad_gate, at::silu_backward(grad_hidden * up, gate).to(at::kBFloat16)));
    }
  }
}

TEST_CASE("swiglu_activation refuses inputs that are not float32 tensors of one shape", "[model][mlp]") {
  const at::Tensor gate = at::randn({4, 6});
  CHECK_THROWS_WITH(ptrain::model::swiglu_activation(gate, at::randn({4, 5})), Catch::Contains("[4, 5]"));
  CHECK_THROWS_WITH(ptrain::model::swiglu_activation(gate, gate.to(at::kBFloat16)), Catch::Contains("BFloat16"));
  CHECK_THROWS_WITH(ptrain::model::swiglu_activation_backward(gate, gate, at::randn({6, 4})),
                    Catch::Contains("swiglu_activation_backward"));
}
