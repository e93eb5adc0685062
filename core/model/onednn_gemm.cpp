#include "core/model/onednn_gemm.h"

#ifdef PTRAIN_HAVE_ONEDNN

#include <ATen/ATen.h>
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_version.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

namespace ptrain::model::onednn {
namespace {

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

}  // namespace

at::Tensor mm(const at::Tensor& a, const at::Tensor& b) {
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

namespace {

dnnl::matmul make_matmul(const dnnl::engine& engine, const dnnl::memory::desc& a_desc, const dnnl::memory::desc& b_desc,
                         const dnnl::memory::desc& c_desc) {
#if DNNL_VERSION_MAJOR >= 3  // 3.0 folded the operation descriptor into the primitive descriptor
  return dnnl::matmul(dnnl::matmul::primitive_desc(engine, a_desc, b_desc, c_desc));
#else
  return dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_desc, b_desc, c_desc), engine));
#endif
}

}  // namespace

// oneDNN 2.6 refuses to create a bf16 matmul on an AVX2 CPU, or under
// ONEDNN_MAX_CPU_ISA=AVX2. Asked once; the answer holds for the process.
bool has_bf16_matmul() {
  static const bool has = [] {
    cap_isa_below_amx();
    using dnnl::memory;
    try {
      const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
      const memory::desc square({2, 2}, memory::data_type::bf16, memory::dims{2, 1});
      make_matmul(engine, square, square, memory::desc({2, 2}, memory::data_type::f32, memory::dims{2, 1}));
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

namespace {

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

// c = a·b through oneDNN's matmul: operands described by a_desc and b_desc
// (bfloat16, or on the widened route float32 holding bfloat16 values), a
// float32 result written as accumulated, without rounding it to bfloat16
// (at::mm on bfloat16 rounds it). A product's value then depends
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

}  // namespace

at::Tensor bf16_mm(const at::Tensor& a, const at::Tensor& b) {
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

namespace {

// [..., m, k] · [..., k, n] → float32 [..., m, n] for contiguous operands of
// `type` (bf16, or f32 holding bfloat16 values: the widened route) with the
// same batch dimensions, through oneDNN's matmul as bf16_mm.
at::Tensor matmul_batched(const at::Tensor& a, const at::Tensor& b, dnnl::memory::data_type type) {
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

// Where oneDNN has no bfloat16 matmul (below AVX-512) the operands' bfloat16
// values are widened to float32 and multiplied by the float32 kernels. A
// product of two bfloat16 values is exact in float32, so this is the same
// arithmetic (bf16 operands, float32 products and sums) in another summation
// order. A row's result must also not depend on the rows beside it, or the
// next product's rounding to bfloat16 turns last-bit differences between
// splits into bf16-sized ones; but the AVX2 GEMMs of oneDNN (and OpenBLAS)
// compute a row differently by the product's row count (tail rows take other
// kernels). With the rows padded to whole blocks of kRowBlock, every row
// takes the same kernels wherever it sits (docs/devices.md).
constexpr int64_t kRowBlock = 48;

// The bfloat16 [..., m, k] operand as float32, m padded by zero rows to a multiple of kRowBlock.
at::Tensor widened_padded_rows(const at::Tensor& bf16_operand) {
  const int64_t rows = bf16_operand.size(-2);
  std::vector<int64_t> sizes = bf16_operand.sizes().vec();
  sizes[sizes.size() - 2] = (rows + kRowBlock - 1) / kRowBlock * kRowBlock;
  at::Tensor padded = at::zeros(sizes, bf16_operand.options().dtype(at::kFloat));
  padded.narrow(-2, 0, rows).copy_(bf16_operand);
  return padded;
}

}  // namespace

at::Tensor bf16_bmm(const at::Tensor& a, const at::Tensor& b) {
  return matmul_batched(a, b, dnnl::memory::data_type::bf16);
}

at::Tensor widened_mm(const at::Tensor& a, const at::Tensor& b) {
  return onednn::mm(widened_padded_rows(a), b.to(at::kFloat)).narrow(0, 0, a.size(0));
}

at::Tensor widened_bmm(const at::Tensor& a, const at::Tensor& b) {
  return matmul_batched(widened_padded_rows(a), b.to(at::kFloat), dnnl::memory::data_type::f32)
      .narrow(-2, 0, a.size(-2))
      .contiguous();
}

std::string version() {
  const dnnl_version_t* v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

}  // namespace ptrain::model::onednn

#endif  // PTRAIN_HAVE_ONEDNN
