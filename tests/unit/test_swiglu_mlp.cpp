// The fused bf16-mixed MLP (core/model/swiglu_mlp.h) against the composition
// it replaces: three model::linear products on bfloat16 operands with
// ATen's silu and multiply between them. The same products and roundings,
// so values and all four gradients agree bit for bit: on the CPU on either
// kernel route, and on a GPU where one is visible (its own activation kernels,
// core/model/swiglu_activation.h, against ATen's ops there).

#include "catch.h"

#include "core/model/gemm.h"
#include "core/model/kernel_route.h"
#include "core/model/swiglu_mlp.h"
#include "kernel_test_support.h"

#include <ATen/ATen.h>

#include <vector>

namespace {

using ptrain::model::CpuKernelRoute;
using ptrain::test::KernelRouteScope;

// The output and the gradients of Σ weights ⊙ mlp(x) in x and the three weights.
std::vector<at::Tensor> run(bool fused, const std::vector<at::Tensor>& inputs, const at::Tensor& weights) {
  std::vector<at::Tensor> leaves;
  for (const at::Tensor& t : inputs) leaves.push_back(t.detach().clone().requires_grad_(true));  // on t's device
  const at::Tensor &x = leaves[0], &gate_w = leaves[1], &up_w = leaves[2], &down_w = leaves[3];
  at::Tensor y;
  if (fused) {
    y = ptrain::model::swiglu_mlp_bf16(x, gate_w, up_w, down_w);
  } else {
    const at::Tensor gate = ptrain::model::linear(x, gate_w, {}, at::kBFloat16);
    const at::Tensor up = ptrain::model::linear(x, up_w, {}, at::kBFloat16);
    y = ptrain::model::linear(at::silu(gate) * up, down_w, {}, at::kBFloat16);
  }
  (y * weights).sum().backward();
  std::vector<at::Tensor> results{y.detach()};
  for (const at::Tensor& leaf : leaves) results.push_back(leaf.grad());
  return results;
}

}  // namespace

TEST_CASE("the fused bf16 MLP gives the composition's values and gradients bit for bit", "[model][mlp][bf16]") {
  at::manual_seed(41);
  const int64_t hidden = 24, intermediate = 40;
  const std::vector<at::Tensor> inputs{at::randn({3, 5, hidden}), 0.3 * at::randn({intermediate, hidden}),
                                       0.3 * at::randn({intermediate, hidden}),
                                       0.3 * at::randn({hidden, intermediate})};
  const at::Tensor weights = at::randn({3, 5, hidden});
  struct Case {
    at::Device device;
    CpuKernelRoute route;
  };
  std::vector<Case> cases{{at::kCPU, CpuKernelRoute::kCpu}, {at::kCPU, CpuKernelRoute::kAccelerator}};
  for (const at::Device device : ptrain::test::devices_here()) {
    if (!device.is_cpu()) cases.push_back({device, CpuKernelRoute::kCpu});  // a GPU takes the accelerator route
  }
  for (const Case& c : cases) {
    const KernelRouteScope scope(c.route);
    INFO("on " << c.device << ", route " << (c.route == CpuKernelRoute::kCpu ? "cpu" : "accelerator"));
    std::vector<at::Tensor> on_device;
    for (const at::Tensor& t : inputs) on_device.push_back(t.to(c.device));
    const std::vector<at::Tensor> fused = run(true, on_device, weights.to(c.device));
    const std::vector<at::Tensor> composed = run(false, on_device, weights.to(c.device));
    REQUIRE(fused.size() == composed.size());
    const char* names[] = {"output", "grad x", "grad gate", "grad up", "grad down"};
    for (size_t i = 0; i < fused.size(); ++i) {
      INFO(names[i]);
      CHECK(fused[i].sizes() == composed[i].sizes());
      CHECK(fused[i].scalar_type() == at::kFloat);
      CHECK(at::equal(fused[i], composed[i]));
    }
    // Not a trivial agreement: the bf16 roundings move the result off float32.
    const at::Tensor x = inputs[0];
    const at::Tensor float32 = at::linear(at::silu(at::linear(x, inputs[1])) * at::linear(x, inputs[2]), inputs[3]);
    CHECK(!at::allclose(fused[0].cpu(), float32, 1e-6, 1e-6));
    CHECK(at::allclose(fused[0].cpu(), float32, 5e-2, 5e-2));
  }
}

TEST_CASE("the fused bf16 MLP refuses weights that do not fit x", "[model][mlp]") {
  const at::Tensor x = at::randn({2, 8});
  CHECK_THROWS_WITH(ptrain::model::swiglu_mlp_bf16(x, at::randn({6, 8}), at::randn({6, 8}), at::randn({8, 5})),
                    Catch::Contains("down [H, I]"));
}
