#include "core/model/gemm.h"

#include "core/model/kernel_route.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/version.h>

#ifdef PTRAIN_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_version.h>
#include <oneapi/dnnl/dnnl.hpp>
#endif

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
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

#ifdef PTRAIN_HAVE_ONEDNN
// How oneDNN reads a [rows, cols] operand in place: row-major ('N') with
// `leading` elements between rows, or the transpose of a row-major matrix
// ('T'). Any other strides are copied to row-major first.
struct Operand {
  at::Tensor storage;  // keeps a copy alive
  char trans;
  int64_t leading;
};

Operand operand(const at::Tensor& t) {
  const int64_t rows = t.size(0), cols = t.size(1);
  if (t.stride(1) == 1 && t.stride(0) >= std::max<int64_t>(1, cols)) return {t, 'N', t.stride(0)};
  if (t.stride(0) == 1 && t.stride(1) >= std::max<int64_t>(1, rows)) return {t, 'T', t.stride(1)};
  const at::Tensor copy = t.contiguous();
  return {copy, 'N', std::max<int64_t>(1, cols)};
}

// oneDNN's AMX kernels block a bfloat16 product by its row count, so a row's
// float32 result changed with the microbatch holding it (1.7e-4 relative
// gradient differences between splits under bf16-mixed); AVX512-BF16 kernels
// give a row the same result in any microbatch (docs/devices.md). The cap must
// come before oneDNN generates its first kernel; fp32 products never use AMX.
// An ONEDNN_MAX_CPU_ISA (or DNNL_MAX_CPU_ISA) in the environment decides
// instead: the setter would otherwise override it, and the tests force the
// widened bf16 route below with it on CPUs that have bf16 kernels.
void cap_isa_below_amx() {
  static const bool capped = [] {
    if (std::getenv("ONEDNN_MAX_CPU_ISA") != nullptr || std::getenv("DNNL_MAX_CPU_ISA") != nullptr) return false;
    try {
      return dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx512_core_bf16) == dnnl::status::success;
    } catch (const dnnl::error&) {
      return false;  // a kernel was generated already
    }
  }();
  (void)capped;
}

// Both operands are float32 CPU matrices with m, n, k > 0.
at::Tensor onednn_mm(const at::Tensor& a, const at::Tensor& b) {
  cap_isa_below_amx();
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  const Operand lhs = operand(a), rhs = operand(b);
  at::Tensor c = at::empty({m, n}, a.options());
  // oneDNN's GEMM is row-major: C = op(A)·op(B).
  const dnnl_status_t status =
      dnnl_sgemm(lhs.trans, rhs.trans, m, n, k, 1.0f, lhs.storage.data_ptr<float>(), lhs.leading,
                 rhs.storage.data_ptr<float>(), rhs.leading, 0.0f, c.data_ptr<float>(), n);
  TORCH_CHECK(status == dnnl_success, "oneDNN sgemm of [", m, ", ", k, "] x [", k, ", ", n, "] failed with status ",
              static_cast<int>(status));
  return c;
}

dnnl::matmul make_matmul(const dnnl::engine& engine, const dnnl::memory::desc& a_desc, const dnnl::memory::desc& b_desc,
                         const dnnl::memory::desc& c_desc) {
#if DNNL_VERSION_MAJOR >= 3  // 3.0 folded the operation descriptor into the primitive descriptor
  return dnnl::matmul(dnnl::matmul::primitive_desc(engine, a_desc, b_desc, c_desc));
#else
  return dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_desc, b_desc, c_desc), engine));
#endif
}

// Whether oneDNN has a bfloat16 matmul on this CPU: it has none below
// AVX-512 (oneDNN 2.6 refuses to create one on an AVX2 CPU, or under
// ONEDNN_MAX_CPU_ISA=AVX2). Asked once; the answer holds for the process.
bool onednn_has_bf16_matmul() {
  static const bool has = [] {
    cap_isa_below_amx();
    using dnnl::memory;
    try {
      const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
      const memory::desc operand({2, 2}, memory::data_type::bf16, memory::dims{2, 1});
      make_matmul(engine, operand, operand, memory::desc({2, 2}, memory::data_type::f32, memory::dims{2, 1}));
      return true;
    } catch (const dnnl::error&) {
      // LibTorch 1.13 picks oneDNN for its own bf16 products from CPUID alone,
      // which under ONEDNN_MAX_CPU_ISA=AVX2 on an AVX-512 CPU fails the same
      // way: its native bf16 products, which an AVX2 CPU gets, take over.
      at::globalContext().setUserEnabledMkldnn(false);
      return false;
    }
  }();
  return has;
}

// A matmul primitive per shape and layout: creating one (choosing its
// kernel) costs more than a small product, and a run sees few shapes.
dnnl::matmul cached_matmul(const dnnl::engine& engine, const dnnl::memory::desc& a_desc,
                           const dnnl::memory::desc& b_desc, const dnnl::memory::desc& c_desc,
                           const std::vector<int64_t>& key) {
  constexpr size_t kMaxPrimitives = 256;  // shapes vary with micro_tokens: bound the cache
  static std::mutex mutex;
  static std::map<std::vector<int64_t>, dnnl::matmul> primitives;
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = primitives.find(key);
  if (it != primitives.end()) return it->second;
  if (primitives.size() >= kMaxPrimitives) primitives.clear();
  return primitives.emplace(key, make_matmul(engine, a_desc, b_desc, c_desc)).first->second;
}

// c = a·b through oneDNN's matmul: bfloat16 operands described by a_desc and
// b_desc, a float32 result written as accumulated, without rounding it to
// bfloat16 (at::mm on bfloat16 rounds it). A product's value then depends
// only on its rows, not on which microbatch holds them, so bf16-mixed keeps
// split invariance to float32 rounding. `key` names the shape and layout.
void run_onednn_matmul(const dnnl::memory::desc& a_desc, const void* a, const dnnl::memory::desc& b_desc, const void* b,
                       const dnnl::memory::desc& c_desc, at::Tensor& c, const std::vector<int64_t>& key) {
  using dnnl::memory;
  cap_isa_below_amx();
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  const dnnl::matmul matmul = cached_matmul(engine, a_desc, b_desc, c_desc, key);
  dnnl::stream stream(engine);
  matmul.execute(stream, {{DNNL_ARG_SRC, memory(a_desc, engine, const_cast<void*>(a))},
                          {DNNL_ARG_WEIGHTS, memory(b_desc, engine, const_cast<void*>(b))},
                          {DNNL_ARG_DST, memory(c_desc, engine, c.data_ptr())}});
  stream.wait();
}

// Both operands bfloat16 CPU matrices with m, n, k > 0 (either may be a
// transposed view, read in place) → float32 [m, n].
at::Tensor onednn_bf16_mm(const at::Tensor& a, const at::Tensor& b) {
  using dnnl::memory;
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  const Operand lhs = operand(a), rhs = operand(b);
  auto strides = [](const Operand& op) -> memory::dims {
    return op.trans == 'N' ? memory::dims{op.leading, 1} : memory::dims{1, op.leading};
  };
  at::Tensor c = at::empty({m, n}, a.options().dtype(at::kFloat));
  run_onednn_matmul(memory::desc({m, k}, memory::data_type::bf16, strides(lhs)), lhs.storage.data_ptr(),
                    memory::desc({k, n}, memory::data_type::bf16, strides(rhs)), rhs.storage.data_ptr(),
                    memory::desc({m, n}, memory::data_type::f32, memory::dims{n, 1}), c,
                    {m, k, n, lhs.trans, lhs.leading, rhs.trans, rhs.leading});
  return c;
}

// [..., m, k] · [..., k, n] → float32 [..., m, n] for contiguous operands of
// `type` (bf16, or f32 holding bfloat16 values: the widened route) with the
// same batch dimensions, through oneDNN's matmul as onednn_bf16_mm.
at::Tensor onednn_bmm(const at::Tensor& a, const at::Tensor& b, dnnl::memory::data_type type) {
  using dnnl::memory;
  const memory::dims a_dims(a.sizes().begin(), a.sizes().end());
  const memory::dims b_dims(b.sizes().begin(), b.sizes().end());
  memory::dims c_dims = a_dims;
  c_dims.back() = b_dims.back();
  auto plain = [](const memory::dims& dims, memory::data_type data_type) {
    memory::dims strides(dims.size(), 1);
    for (size_t i = dims.size() - 1; i > 0; --i) strides[i - 1] = strides[i] * dims[i];
    return memory::desc(dims, data_type, strides);
  };
  // Batched keys start negative, apart from the 2-D keys, whose m is positive.
  std::vector<int64_t> key{-1 - static_cast<int64_t>(type)};
  key.insert(key.end(), a_dims.begin(), a_dims.end());
  key.insert(key.end(), b_dims.begin(), b_dims.end());
  at::Tensor c = at::empty(c_dims, a.options().dtype(at::kFloat));
  run_onednn_matmul(plain(a_dims, type), a.data_ptr(), plain(b_dims, type), b.data_ptr(),
                    plain(c_dims, memory::data_type::f32), c, key);
  return c;
}
#endif

// Rounds to the operand dtype; a no-op for operands already in it.
at::Tensor as_operand(const at::Tensor& t, at::ScalarType operands) {
  return t.scalar_type() == operands ? t : t.to(operands);
}

// The CPU's bf16 route where oneDNN has no bfloat16 matmul (below AVX-512):
// the operands' bfloat16 values widened to float32 and multiplied by the
// float32 GEMM. A product of two bfloat16 values is exact in float32, so
// this is the same arithmetic (bf16 operands, float32 products and sums) in
// another summation order, and a row's result again depends on its rows only.
#ifdef PTRAIN_HAVE_ONEDNN
// A row's result must not depend on the rows beside it either, or the next
// product's rounding to bfloat16 turns last-bit differences between splits
// into bf16-sized ones. The AVX2 GEMMs of oneDNN (and OpenBLAS) compute a row
// differently by the product's row count (tail rows take other kernels);
// with the rows padded to whole blocks of kRowBlock, every row takes the
// same kernels wherever it sits (docs/devices.md).
constexpr int64_t kRowBlock = 48;

// The bfloat16 [..., m, k] operand as float32 with m padded by zero rows to a multiple of kRowBlock.
at::Tensor widened_padded_rows(const at::Tensor& bf16_operand) {
  const int64_t rows = bf16_operand.size(-2);
  std::vector<int64_t> sizes = bf16_operand.sizes().vec();
  sizes[sizes.size() - 2] = (rows + kRowBlock - 1) / kRowBlock * kRowBlock;
  at::Tensor padded = at::zeros(sizes, bf16_operand.options().dtype(at::kFloat));
  padded.narrow(-2, 0, rows).copy_(bf16_operand);
  return padded;
}

at::Tensor widened(const at::Tensor& bf16_operand) { return bf16_operand.to(at::kFloat); }
#endif

// ATen's product of operands already in a low-precision dtype, as float32.
// LibTorch 2.8 added products that write the float32 accumulation as it is
// (aten::mm.dtype, CUDA only): not rounded to bfloat16 first, as with oneDNN
// on the CPU, so a row's product depends on its microbatch's shape only to
// float32 rounding. Elsewhere the bfloat16 result is widened.
at::Tensor aten_low_precision_mm(const at::Tensor& a, const at::Tensor& b) {
#ifdef PTRAIN_HAVE_ONEDNN
  if (!a.is_cuda()) onednn_has_bf16_matmul();  // settles which bf16 products ATen takes on a CPU
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
      if (onednn_has_bf16_matmul()) return onednn_bf16_mm(a_operand, b_operand);
      return onednn_mm(widened_padded_rows(a_operand), widened(b_operand)).narrow(0, 0, a.size(0));
    }
#endif
    return aten_low_precision_mm(a_operand, b_operand);
  }
#ifdef PTRAIN_HAVE_ONEDNN
  if (a.size(0) > 0 && a.size(1) > 0 && b.size(1) > 0 && onednn_applies(a) && onednn_applies(b)) {
    return onednn_mm(a, b);
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
      if (onednn_has_bf16_matmul()) return onednn_bmm(a_operand, b_operand, dnnl::memory::data_type::bf16);
      return onednn_bmm(widened_padded_rows(a_operand), widened(b_operand), dnnl::memory::data_type::f32)
          .narrow(-2, 0, a.size(-2))
          .contiguous();
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
    return onednn_has_bf16_matmul() ? "oneDNN bf16 matmul"
                                    : "bf16 operands widened to fp32 (this CPU has no oneDNN bf16 matmul)";
  }
#endif
  return "ATen";
}

std::string gemm_backend() {
#ifdef PTRAIN_HAVE_ONEDNN
  const dnnl_version_t* v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
#else
  return "ATen (system BLAS)";
#endif
}

}  // namespace ptrain::model
