// The fused RMSNorm and rotary kernels (core/model/fused_kernels.h) against
// their textbook expressions evaluated in float64 by autograd: values and
// gradients, on one and on two threads, shared and per-row angle tables, and
// the composite path other dtypes take; also on a GPU where one is visible
// (rotary's CUDA kernel, core/model/rotary.cu, and PyTorch's fused RMSNorm).

#include "catch.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "core/model/fused_kernels.h"
#include "kernel_test_support.h"

#include <cmath>

namespace {

using ptrain::test::max_relative_error;
using ptrain::test::ThreadCount;
namespace fused = ptrain::model::fused;

at::Tensor textbook_rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  return weight * x / at::sqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps);
}

// x: [B, T, n, d]; cos/sin broadcast against [B, n, T, d].
at::Tensor textbook_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, double scale) {
  const at::Tensor heads_first = x.transpose(1, 2);
  const int64_t half = x.size(3) / 2;
  const at::Tensor rotated_half =
      at::cat({-heads_first.narrow(3, half, half), heads_first.narrow(3, 0, half)}, 3);
  return scale * (heads_first * cos + rotated_half * sin);
}

// Angles of rotary embeddings for the given positions: [..., d], as the model builds them.
std::pair<at::Tensor, at::Tensor> angle_tables(const at::Tensor& positions, int64_t d) {
  const at::Tensor inv_freq = at::pow(10000.0, at::arange(0, d, 2, at::kDouble) / static_cast<double>(d)).reciprocal();
  const at::Tensor freqs = positions.to(at::kDouble).unsqueeze(-1) * inv_freq;
  const at::Tensor angles = at::cat({freqs, freqs}, -1);
  return {angles.cos().to(at::kFloat), angles.sin().to(at::kFloat)};
}

// One case of the rms_norm check.
void check_rms_norm(at::Device device, int threads) {
  const ThreadCount thread_count(threads);
  at::manual_seed(3);
  // 200 rows of 300: several parallel chunks, and a width that is no multiple of a vector.
  const at::Tensor x = at::randn({4, 50, 300});
  x[1][7].zero_();  // a row of zeros: eps alone keeps it finite
  const at::Tensor weight = at::randn({300});
  const at::Tensor grad_y = at::randn({4, 50, 300});
  const double eps = 1e-6;

  const at::Tensor x_leaf = x.to(device).clone().requires_grad_(true);
  const at::Tensor weight_leaf = weight.to(device).clone().requires_grad_(true);
  const at::Tensor y = fused::rms_norm(x_leaf, weight_leaf, eps);
  y.backward(grad_y.to(device));

  const at::Tensor x64 = x.to(at::kDouble).requires_grad_(true);
  const at::Tensor weight64 = weight.to(at::kDouble).requires_grad_(true);
  const at::Tensor expected = textbook_rms_norm(x64, weight64, eps);
  expected.backward(grad_y.to(at::kDouble));

  INFO("on " << device << ", threads " << threads);
  CHECK(y.device() == device);
  CHECK(max_relative_error(y.cpu(), expected.detach()) < 1e-6);
  CHECK(max_relative_error(x_leaf.grad().cpu(), x64.grad()) < 1e-5);
  CHECK(max_relative_error(weight_leaf.grad().cpu(), weight64.grad()) < 1e-5);
  CHECK(at::isfinite(x_leaf.grad()).all().item<bool>());
}

// One case of the rotary check.
void check_rotary(at::Device device, int threads, bool per_row, double scale) {
  const ThreadCount thread_count(threads);
  at::manual_seed(5);
  const int64_t b = 3, t = 40, n = 4, d = 16;
  // Shared tables: positions 0..T-1; per-row tables: each token's own position (packed rows restart).
  const at::Tensor positions =
      per_row ? at::randint(0, 64, {b, t}, at::kLong) : at::arange(t, at::kLong);
  const auto [cos, sin] = angle_tables(positions, d);
  const at::Tensor x = at::randn({b, t, n, d});
  const at::Tensor grad_out = at::randn({b, n, t, d});

  const at::Tensor x_leaf = x.to(device).clone().requires_grad_(true);
  const at::Tensor out = fused::rotary(x_leaf, cos.to(device), sin.to(device), scale);
  out.backward(grad_out.to(device));

  const at::Tensor x64 = x.to(at::kDouble).requires_grad_(true);
  const at::Tensor cos64 = per_row ? cos.to(at::kDouble).unsqueeze(1) : cos.to(at::kDouble);
  const at::Tensor sin64 = per_row ? sin.to(at::kDouble).unsqueeze(1) : sin.to(at::kDouble);
  const at::Tensor expected = textbook_rotary(x64, cos64, sin64, scale);
  expected.backward(grad_out.to(at::kDouble));

  INFO("on " << device << ", threads " << threads << ", per-row tables " << per_row << ", scale " << scale);
  CHECK(out.sizes() == at::IntArrayRef({b, n, t, d}));
  CHECK(out.is_contiguous());
  CHECK(out.device() == device);
  CHECK(max_relative_error(out.cpu(), expected.detach()) < 1e-6);
  CHECK(max_relative_error(x_leaf.grad().cpu(), x64.grad()) < 1e-6);
  // The composite path (float64 here) is the same function.
  CHECK(max_relative_error(fused::rotary(x.to(at::kDouble), cos, sin, scale), expected.detach()) < 1e-6);
}

}  // namespace

TEST_CASE("fused rms_norm equals weight * x / sqrt(mean(x^2) + eps), values and gradients", "[model][fused]") {
  for (const at::Device device : ptrain::test::devices_here()) {
    for (const int threads : {1, 2}) check_rms_norm(device, threads);  // on CUDA: PyTorch's fused kernel
  }
}

TEST_CASE("fused rotary equals scale * (x cos + rotate_half(x) sin) in [B, n, T, d], values and gradients",
          "[model][fused]") {
  for (const at::Device device : ptrain::test::devices_here()) {
    for (const int threads : {1, 2}) {
      for (const bool per_row : {false, true}) {
        for (const double scale : {1.0, 0.125}) check_rotary(device, threads, per_row, scale);
      }
    }
  }
}

TEST_CASE("fused rotary takes its kernel on the accelerator route too, as on CUDA", "[model][fused]") {
  // There the CPU's kernel stands in for the CUDA one (the GPU-work audit profiles it so).
  const ptrain::test::KernelRouteScope scope(ptrain::model::CpuKernelRoute::kAccelerator);
  for (const bool per_row : {false, true}) check_rotary(at::kCPU, 2, per_row, 0.125);
}

TEST_CASE("fused rms_norm reads non-contiguous input, and other dtypes take the same function", "[model][fused]") {
  at::manual_seed(4);
  const at::Tensor x = at::randn({16, 6}).t();  // [6, 16], transposed strides
  const at::Tensor weight = at::randn({16});
  const at::Tensor expected = textbook_rms_norm(x.to(at::kDouble), weight.to(at::kDouble), 1e-5);
  CHECK(max_relative_error(fused::rms_norm(x, weight, 1e-5), expected) < 1e-6);
  // float64 is not the fused kernel's: the composite expression, to float64 rounding.
  CHECK(max_relative_error(fused::rms_norm(x.to(at::kDouble), weight.to(at::kDouble), 1e-5), expected) < 1e-12);
}

TEST_CASE("fused rotary names a table of the wrong shape", "[model][fused]") {
  const at::Tensor x = at::randn({2, 5, 3, 8});
  const at::Tensor wrong = at::randn({6, 8});
  CHECK_THROWS_WITH(fused::rotary(x, wrong, wrong, 1.0), Catch::Contains("cos and sin must be [T, d]"));
}
