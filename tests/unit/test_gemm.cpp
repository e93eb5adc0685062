// The model's GEMM (core/model/gemm.h): mm and linear against the same
// products computed in float64 by ATen and its autograd: values and
// gradients, transposed and strided operands, with and without bias, on one
// and on two threads, and the ATen path other dtypes take.

#include "catch.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>

#include <cstdlib>
#include <string>

#include "core/model/gemm.h"
#include "kernel_test_support.h"

namespace {

using ptrain::test::max_relative_error;
using ptrain::test::ThreadCount;
namespace model = ptrain::model;

// linear's value and its three gradients against float64 autograd of x·Wᵀ + b.
void check_linear(int threads, bool with_bias, bool transposed_input) {
  const ThreadCount thread_count(threads);
  at::manual_seed(7);
  // 3·37 rows, 45 in, 29 out: no size is a multiple of a vector or a block.
  const at::Tensor x = at::randn({3, 37, 45});
  const at::Tensor weight = at::randn({29, 45});
  const at::Tensor bias = with_bias ? at::randn({29}) : at::Tensor();
  const at::Tensor grad_y = at::randn({3, 37, 29});

  // The transposed case stores the leaf as [45, 37, 3] and hands linear a permuted view of it.
  const at::Tensor x_leaf = (transposed_input ? x.permute({2, 1, 0}).contiguous() : x.clone()).requires_grad_(true);
  const at::Tensor weight_leaf = weight.clone().requires_grad_(true);
  const at::Tensor bias_leaf = with_bias ? bias.clone().requires_grad_(true) : at::Tensor();
  const at::Tensor input = transposed_input ? x_leaf.permute({2, 1, 0}) : x_leaf;
  const at::Tensor y = model::linear(input, weight_leaf, bias_leaf);
  y.backward(grad_y);

  const at::Tensor x64 = x.to(at::kDouble).requires_grad_(true);
  const at::Tensor weight64 = weight.to(at::kDouble).requires_grad_(true);
  const at::Tensor bias64 = with_bias ? bias.to(at::kDouble).requires_grad_(true) : at::Tensor();
  at::Tensor expected = at::matmul(x64, weight64.t());
  if (with_bias) expected = expected + bias64;
  expected.backward(grad_y.to(at::kDouble));

  INFO("threads " << threads << ", bias " << with_bias << ", transposed input " << transposed_input);
  CHECK(y.sizes() == at::IntArrayRef({3, 37, 29}));
  CHECK(max_relative_error(y, expected.detach()) < 1e-5);
  const at::Tensor grad_x = transposed_input ? x_leaf.grad().permute({2, 1, 0}) : x_leaf.grad();
  CHECK(max_relative_error(grad_x, x64.grad()) < 1e-5);
  CHECK(max_relative_error(weight_leaf.grad(), weight64.grad()) < 1e-5);
  if (with_bias) CHECK(max_relative_error(bias_leaf.grad(), bias64.grad()) < 1e-5);
}

}  // namespace

TEST_CASE("gemm mm equals the float64 product for row-major, transposed and strided operands", "[model][gemm]") {
  for (const int threads : {1, 2}) {
    const ThreadCount thread_count(threads);
    at::manual_seed(1);
    const at::Tensor a = at::randn({67, 130});
    const at::Tensor b = at::randn({130, 33});
    const at::Tensor expected = at::mm(a.to(at::kDouble), b.to(at::kDouble));
    INFO("threads " << threads);
    CHECK(max_relative_error(model::mm(a, b), expected) < 1e-5);
    CHECK(max_relative_error(model::mm(a.t().contiguous().t(), b), expected) < 1e-5);  // a read transposed
    CHECK(max_relative_error(model::mm(a, b.t().contiguous().t()), expected) < 1e-5);  // b read transposed
    const at::Tensor wide = at::randn({67, 200});                                      // rows 200 apart
    wide.narrow(1, 10, 130).copy_(a);
    CHECK(max_relative_error(model::mm(wide.narrow(1, 10, 130), b), expected) < 1e-5);
    CHECK(max_relative_error(model::mm(a.to(at::kDouble), b.to(at::kDouble)), expected) < 1e-12);  // ATen's
    // Every other column: neither layout, so copied first.
    const at::Tensor every_other = at::randn({67, 260});
    every_other.slice(1, 0, 260, 2).copy_(a);
    CHECK(max_relative_error(model::mm(every_other.slice(1, 0, 260, 2), b), expected) < 1e-5);
  }
}

TEST_CASE("gemm mm of empty operands", "[model][gemm]") {
  CHECK(model::mm(at::randn({0, 4}), at::randn({4, 3})).sizes() == at::IntArrayRef({0, 3}));
  const at::Tensor no_inner = model::mm(at::randn({2, 0}), at::randn({0, 3}));
  CHECK(no_inner.sizes() == at::IntArrayRef({2, 3}));
  CHECK(no_inner.abs().sum().item<float>() == 0.0f);
  CHECK_THROWS_WITH(model::mm(at::randn({2, 3}), at::randn({4, 3})), Catch::Contains("[m, k] and [k, n]"));
}

TEST_CASE("gemm linear equals x W^T + b in float64, values and gradients", "[model][gemm]") {
  for (const int threads : {1, 2}) {
    for (const bool with_bias : {false, true}) {
      for (const bool transposed : {false, true}) check_linear(threads, with_bias, transposed);
    }
  }
}

TEST_CASE("gemm linear: frozen weight, no grad mode, other dtypes and wrong shapes", "[model][gemm]") {
  at::manual_seed(2);
  const at::Tensor x = at::randn({5, 8});
  const at::Tensor weight = at::randn({3, 8});
  const at::Tensor expected = at::matmul(x.to(at::kDouble), weight.to(at::kDouble).t());
  {
    // Only the input learns: the weight gets no gradient, the input the right one.
    const at::Tensor x_leaf = x.clone().requires_grad_(true);
    model::linear(x_leaf, weight).sum().backward();
    CHECK(max_relative_error(x_leaf.grad(), weight.to(at::kDouble).sum(0).expand({5, 8})) < 1e-5);
  }
  {
    const at::NoGradGuard no_grad;
    const at::Tensor y = model::linear(x, weight.clone().requires_grad_(true));
    CHECK_FALSE(y.requires_grad());
    CHECK(max_relative_error(y, expected) < 1e-5);
  }
  CHECK(max_relative_error(model::linear(x.to(at::kDouble), weight.to(at::kDouble)), expected) < 1e-12);
  CHECK_THROWS_WITH(model::linear(x, at::randn({3, 7})), Catch::Contains("weight [N, K]"));
  CHECK_THROWS_WITH(model::linear(x, weight, at::randn({4})), Catch::Contains("bias [3]"));
}

TEST_CASE("gemm names its backend", "[model][gemm]") {
  const std::string backend = model::gemm_backend();
#ifdef PTRAIN_HAVE_ONEDNN  // the build's choice (CMake option PTRAIN_ONEDNN)
  CHECK(backend.rfind("oneDNN ", 0) == 0);
#else
  CHECK(backend == "ATen (system BLAS)");
#endif
}

namespace {

// The float64 product of operands rounded to bfloat16: what bf16-mixed
// computes, up to float32 accumulation (and, without oneDNN, the rounding of
// its result to bfloat16).
at::Tensor rounded_product(const at::Tensor& a, const at::Tensor& b) {
  return at::matmul(a.to(at::kBFloat16).to(at::kDouble), b.to(at::kBFloat16).to(at::kDouble));
}

}  // namespace

TEST_CASE("gemm with bfloat16 operands: float32 in and out, the product of the rounded operands",
          "[model][gemm][bf16]") {
  at::manual_seed(3);
  const at::Tensor x = at::randn({3, 37, 45});
  const at::Tensor weight = at::randn({29, 45});
  const at::Tensor bias = at::randn({29});
  const at::Tensor grad_y = at::randn({3, 37, 29});
  const at::Tensor x_leaf = x.clone().requires_grad_(true);
  const at::Tensor weight_leaf = weight.clone().requires_grad_(true);
  const at::Tensor bias_leaf = bias.clone().requires_grad_(true);
  const at::Tensor y = model::linear(x_leaf, weight_leaf, bias_leaf, at::kBFloat16);
  y.backward(grad_y);

#ifdef PTRAIN_HAVE_ONEDNN
  // oneDNN writes the float32 result as accumulated: float32 rounding only.
  constexpr double kBf16Result = 1e-5;
#else
  // ATen rounds each product's result to bfloat16: 2^-8 relative.
  constexpr double kBf16Result = 1.0 / 256;
#endif
  CHECK(y.scalar_type() == at::kFloat);
  CHECK(max_relative_error(y - bias, rounded_product(x, weight.t())) < kBf16Result);
  CHECK(max_relative_error(x_leaf.grad(), rounded_product(grad_y, weight)) < kBf16Result);
  const at::Tensor expected_weight_grad = rounded_product(grad_y.reshape({-1, 29}).t(), x.reshape({-1, 45}));
  CHECK(max_relative_error(weight_leaf.grad(), expected_weight_grad) < kBf16Result);
  CHECK(max_relative_error(bias_leaf.grad(), grad_y.sum(at::IntArrayRef{0, 1}).to(at::kDouble)) <
        1e-5);  // the bias stays fp32
  CHECK(weight_leaf.grad().scalar_type() == at::kFloat);
  // The rounding is real: the float32 product differs by more than float32 rounding.
  CHECK(max_relative_error(y - bias, at::matmul(x.to(at::kDouble), weight.to(at::kDouble).t())) > 1e-4);

  const at::Tensor a = at::randn({67, 130});
  const at::Tensor b = at::randn({130, 33});
  const at::Tensor product = model::mm(a, b.t().contiguous().t(), at::kBFloat16);
  CHECK(product.scalar_type() == at::kFloat);
  CHECK(max_relative_error(product, rounded_product(a, b)) < kBf16Result);
  CHECK_THROWS_WITH(model::mm(a, b, at::kHalf), Catch::Contains("float32 or bfloat16"));
}

#ifdef PTRAIN_HAVE_ONEDNN
TEST_CASE("gemm's bf16 route is oneDNN's bf16 matmul where oneDNN has one, else the widened fp32 product",
          "[model][gemm][bf16]") {
  // ctest runs this case once more with oneDNN capped at AVX2 ("avx2: ..."),
  // where oneDNN 2.6 has no bf16 matmul: the other route must then be the one taken.
  const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA");
  const std::string route = model::bf16_gemm_route();
  if (cap != nullptr && std::string(cap) == "AVX2") {
    CHECK_THAT(route, Catch::Contains("widened to fp32"));
  } else {
    CHECK_THAT(route, Catch::Contains("widened to fp32") || Catch::Equals("oneDNN bf16 matmul"));
  }
  // Either way the product is the float32 accumulation of the rounded operands: the values
  // of the case above, and exactly the fp32 GEMM of the rounded operands on the widened route.
  at::manual_seed(11);
  const at::Tensor a = at::randn({40, 70});
  const at::Tensor b = at::randn({70, 24});
  const at::Tensor product = model::mm(a, b, at::kBFloat16);
  CHECK(max_relative_error(product, rounded_product(a, b)) < 1e-5);
  if (route.find("widened") != std::string::npos) {
    CHECK(at::equal(product, model::mm(a.to(at::kBFloat16).to(at::kFloat), b.to(at::kBFloat16).to(at::kFloat))));
  }
}
#endif

TEST_CASE("gemm batched_matmul: bfloat16 operands, float32 results, values and gradients", "[model][gemm][bf16]") {
  at::manual_seed(5);
  // [batch 2, heads 3]: attention's scores q·kᵀ with a transposed, non-contiguous right operand.
  const at::Tensor a = at::randn({2, 3, 17, 8});
  const at::Tensor b_stored = at::randn({2, 3, 19, 8});
  const at::Tensor grad_c = at::randn({2, 3, 17, 19});
  const at::Tensor a_leaf = a.clone().requires_grad_(true);
  const at::Tensor b_leaf = b_stored.clone().requires_grad_(true);
  const at::Tensor c = model::batched_matmul(a_leaf, b_leaf.transpose(-2, -1), at::kBFloat16);
  c.backward(grad_c);
#ifdef PTRAIN_HAVE_ONEDNN
  constexpr double kTolerance = 1e-5;  // float32 results, as accumulated
#else
  constexpr double kTolerance = 1.0 / 256;
#endif
  const at::Tensor bt = b_stored.transpose(-2, -1);
  CHECK(c.scalar_type() == at::kFloat);
  CHECK(max_relative_error(c, rounded_product(a, bt)) < kTolerance);
  CHECK(max_relative_error(a_leaf.grad(), rounded_product(grad_c, bt.transpose(-2, -1))) < kTolerance);
  CHECK(max_relative_error(b_leaf.grad(), rounded_product(grad_c.transpose(-2, -1), a)) < kTolerance);
  CHECK(max_relative_error(c, at::matmul(a.to(at::kDouble), bt.to(at::kDouble))) > 1e-4);  // rounding is real
  // float32 operands: at::matmul itself.
  CHECK(at::equal(model::batched_matmul(a, bt), at::matmul(a, bt)));
  CHECK_THROWS_WITH(model::batched_matmul(a, at::randn({2, 4, 8, 5})), Catch::Contains("same batch dimensions"));
}
