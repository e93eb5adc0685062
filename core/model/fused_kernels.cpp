#include "core/model/fused_kernels.h"

#include "core/model/kernel_route.h"
#include "core/model/rotary_math.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/version.h>

#ifdef PTRAIN_WITH_CUDA
#include "core/model/rotary_cuda.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <algorithm>
#include <cmath>

namespace ptrain::model::fused {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Rows per parallel chunk: about ATen's grain of 32768 elements, below which
// waking a second thread costs more than it saves.
int64_t grain_rows(int64_t row_size) { return std::max<int64_t>(1, 32768 / std::max<int64_t>(1, row_size)); }

bool fused_kernel_applies(const at::Tensor& x) { return takes_cpu_kernels(x) && x.scalar_type() == at::kFloat; }

// The rotary kernel also runs on CUDA (rotary.cu), and on the CPU on either
// kernel route: there it stands in for the CUDA kernel on the accelerator
// route (kernel_route.h), as the GPU-work audit profiles it.
#ifdef PTRAIN_WITH_CUDA
constexpr bool kCudaKernels = true;
#else
constexpr bool kCudaKernels = false;
#endif
bool rotary_kernel_applies(const at::Tensor& t) {
  return t.scalar_type() == at::kFloat && (t.is_cpu() || (kCudaKernels && t.is_cuda()));
}

struct RmsNormFunction : public torch::autograd::Function<RmsNormFunction> {
  // x: [..., H] contiguous, weight: [H] contiguous → y: [..., H]
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight, double eps) {
    const int64_t h = x.size(-1);
    const int64_t rows = x.numel() / h;
    at::Tensor y = at::empty_like(x);
    at::Tensor inv_rms = at::empty({rows}, x.options());  // 1 / √(mean(x²) + eps), kept for backward
    const float* x_data = x.data_ptr<float>();
    const float* w = weight.data_ptr<float>();
    float* y_data = y.data_ptr<float>();
    float* inv_rms_data = inv_rms.data_ptr<float>();
    at::parallel_for(0, rows, grain_rows(h), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const float* xr = x_data + r * h;
        float* yr = y_data + r * h;
        float sum_squares = 0.0f;
#pragma omp simd reduction(+ : sum_squares)
        for (int64_t i = 0; i < h; ++i) sum_squares += xr[i] * xr[i];
        const float scale = 1.0f / std::sqrt(sum_squares / static_cast<float>(h) + static_cast<float>(eps));
        inv_rms_data[r] = scale;
#pragma omp simd
        for (int64_t i = 0; i < h; ++i) yr[i] = w[i] * (xr[i] * scale);
      }
    });
    ctx->save_for_backward({x, weight, inv_rms});
    return y;
  }

  // With g = weight ⊙ dy and s = 1/rms:  dx = s·g − x·s³·mean(g ⊙ x),  dweight = Σ_rows dy ⊙ x·s.
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& weight = saved[1];
    const at::Tensor& inv_rms = saved[2];
    const at::Tensor grad_y = grad_outputs[0].contiguous();
    const int64_t h = x.size(-1);
    const int64_t rows = x.numel() / h;
    at::Tensor grad_x = at::empty_like(x);
    // One partial dweight per thread, summed at the end: no thread writes another's row.
    at::Tensor grad_weight_parts = at::zeros({at::get_num_threads(), h}, x.options());
    const float* x_data = x.data_ptr<float>();
    const float* w = weight.data_ptr<float>();
    const float* s_data = inv_rms.data_ptr<float>();
    const float* gy_data = grad_y.data_ptr<float>();
    float* gx_data = grad_x.data_ptr<float>();
    float* parts = grad_weight_parts.data_ptr<float>();
    at::parallel_for(0, rows, grain_rows(h), [&](int64_t begin, int64_t end) {
      float* gw = parts + at::get_thread_num() * h;
      for (int64_t r = begin; r < end; ++r) {
        const float* xr = x_data + r * h;
        const float* gyr = gy_data + r * h;
        float* gxr = gx_data + r * h;
        const float s = s_data[r];
        float dot = 0.0f;  // Σ (weight ⊙ dy) ⊙ x
#pragma omp simd reduction(+ : dot)
        for (int64_t i = 0; i < h; ++i) dot += w[i] * gyr[i] * xr[i];
        const float correction = s * s * s * dot / static_cast<float>(h);
#pragma omp simd
        for (int64_t i = 0; i < h; ++i) {
          gxr[i] = s * w[i] * gyr[i] - xr[i] * correction;
          gw[i] += gyr[i] * (xr[i] * s);
        }
      }
    });
    return {grad_x, grad_weight_parts.sum(0), at::Tensor()};
  }
};

// The rotary map over the heads of `tokens` tokens (B·T) on the CPU (rotary_math.h).
void rotate_on_cpu(const float* in, float* out, const float* cos, const float* sin, int64_t tokens,
                   const rotary_math::Layout& layout, float scale, bool adjoint) {
  const int64_t half = layout.d / 2;
  at::parallel_for(0, tokens, grain_rows(layout.n * layout.d), [&](int64_t begin, int64_t end) {
    for (int64_t token = begin; token < end; ++token) {
      const float* c = cos + layout.table(token);
      const float* s = sin + layout.table(token);
      for (int64_t head = 0; head < layout.n; ++head) {
        const int64_t token_major = layout.token_major(token, head), head_major = layout.head_major(token, head);
        if (!adjoint) {
          const float* x = in + token_major;
          float* y = out + head_major;
#pragma omp simd
          for (int64_t i = 0; i < half; ++i) rotary_math::map_pair<false>(x, y, c, s, i, half, scale);
        } else {
          const float* g = in + head_major;
          float* dx = out + token_major;
#pragma omp simd
          for (int64_t i = 0; i < half; ++i) rotary_math::map_pair<true>(g, dx, c, s, i, half, scale);
        }
      }
    }
  });
}

// The rotary map from `in` into `out` (adjoint: its transpose, from dout: [B, n, T, d] to dx: [B, T, n, d]),
// with x's shape [B, T, n, d]: on the GPU in a CUDA build, else on the CPU. One profiler event, the one
// kernel it is (bench/gpu_audit.py).
void rotate(const at::Tensor& in, at::Tensor& out, const at::Tensor& cos, const at::Tensor& sin,
            at::IntArrayRef x_shape, double scale, bool adjoint) {
  RECORD_FUNCTION(adjoint ? "ptrain::rotary_backward" : "ptrain::rotary", std::vector<c10::IValue>({in, cos, sin}));
  const int64_t t = x_shape[1], n = x_shape[2], d = x_shape[3];
  const rotary_math::Layout layout{t, n, d, cos.dim() == 3 ? t * d : 0};
  const int64_t tokens = x_shape[0] * t;
#ifdef PTRAIN_WITH_CUDA
  if (in.is_cuda()) {
    const c10::cuda::CUDAGuard guard(in.device());
    const char* error = rotary_cuda::launch_rotary(in.data_ptr<float>(), out.data_ptr<float>(), cos.data_ptr<float>(),
                                                   sin.data_ptr<float>(), tokens, layout, static_cast<float>(scale),
                                                   adjoint, c10::cuda::getCurrentCUDAStream().stream());
    TORCH_CHECK(error == nullptr, "rotary: CUDA kernel: ", error);
    return;
  }
#endif
  rotate_on_cpu(in.data_ptr<float>(), out.data_ptr<float>(), cos.data_ptr<float>(), sin.data_ptr<float>(), tokens,
                layout, static_cast<float>(scale), adjoint);
}

struct RotaryFunction : public torch::autograd::Function<RotaryFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                            double scale) {
    const int64_t b = x.size(0), t = x.size(1), n = x.size(2), d = x.size(3);
    at::Tensor out = at::empty({b, n, t, d}, x.options());
    rotate(x, out, cos, sin, x.sizes(), scale, /*adjoint=*/false);
    ctx->save_for_backward({cos, sin});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["shape"] = x.sizes();
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const std::vector<int64_t> shape = ctx->saved_data["shape"].toIntVector();
    const at::Tensor grad_out = grad_outputs[0].contiguous();
    at::Tensor grad_x = at::empty(shape, grad_out.options());
    rotate(grad_out, grad_x, saved[0], saved[1], shape, ctx->saved_data["scale"].toDouble(), /*adjoint=*/true);
    return {grad_x, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor rotate_half(const at::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

}  // namespace

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  TORCH_CHECK(weight.dim() == 1 && x.size(-1) == weight.size(0), "rms_norm: x [..., H] and weight [H] expected, got ",
              x.sizes(), " and ", weight.sizes());
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 9)
  // On CUDA, PyTorch's own fused kernel, forward and backward
  // (FusedRmsNormBackward0), in float32 as the composite below.
  if (x.is_cuda() && x.scalar_type() == at::kFloat && weight.scalar_type() == at::kFloat && x.numel() > 0) {
    return std::get<0>(at::_fused_rms_norm(x, {x.size(-1)}, weight, eps));
  }
#endif
  if (!fused_kernel_applies(x) || !fused_kernel_applies(weight) || x.numel() == 0) {
    return weight * (x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps));
  }
  return RmsNormFunction::apply(x.contiguous(), weight.contiguous(), eps);
}

at::Tensor rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, double scale) {
  TORCH_CHECK(x.dim() == 4 && x.size(3) % 2 == 0, "rotary: x must be [B, T, n, d] with d even, got ", x.sizes());
  const int64_t b = x.size(0), t = x.size(1), d = x.size(3);
  const bool shared = cos.dim() == 2;
  TORCH_CHECK(cos.sizes() == sin.sizes() &&
                  (shared ? cos.sizes() == at::IntArrayRef({t, d}) : cos.sizes() == at::IntArrayRef({b, t, d})),
              "rotary: cos and sin must be [T, d] = [", t, ", ", d, "] or [B, T, d], got ", cos.sizes(), " and ",
              sin.sizes());
  TORCH_CHECK(!cos.requires_grad() && !sin.requires_grad(), "rotary: the angle tables are not differentiated");
  if (!rotary_kernel_applies(x) || !rotary_kernel_applies(cos) || cos.device() != x.device() || x.numel() == 0) {
    const at::Tensor heads_first = x.transpose(1, 2);  // [B, n, T, d]
    const at::Tensor c = shared ? cos : cos.unsqueeze(1);
    const at::Tensor s = shared ? sin : sin.unsqueeze(1);
    const at::Tensor rotated = heads_first * c + rotate_half(heads_first) * s;
    return (scale == 1.0 ? rotated : rotated * scale).contiguous();
  }
  return RotaryFunction::apply(x.contiguous(), cos.contiguous(), sin.contiguous(), scale);
}

}  // namespace ptrain::model::fused
