#include "core/model/attention_varlen.h"

#include <ATen/ATen.h>
#include <torch/version.h>

namespace ptrain::model {
namespace {

// LibTorch 2.5 is where at::_flash_attention_forward takes the signature
// called below (and where SDPA took enable_gqa); ptrain's CUDA builds use
// newer ones.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5)
constexpr bool kVarlenFlash = true;

// [B, n, T, d] → [B·T, n, d], the layout the varlen kernel reads (a copy).
at::Tensor token_major(const at::Tensor& x) {
  return x.transpose(1, 2).reshape({x.size(0) * x.size(2), x.size(1), x.size(3)});
}
#else
constexpr bool kVarlenFlash = false;
#endif

}  // namespace

bool packed_flash_attention_applies(at::Device device, at::ScalarType dtype, int64_t head_dim) {
  return kVarlenFlash && device.is_cuda() && (dtype == at::kBFloat16 || dtype == at::kHalf) && head_dim % 8 == 0 &&
         head_dim <= 256;
}

at::Tensor packed_sequence_starts(const at::Tensor& document_ids) {
  TORCH_CHECK(document_ids.dim() == 2, "packed_sequence_starts: document_ids must be [B, T], got ",
              document_ids.sizes());
  const int64_t b = document_ids.size(0), t = document_ids.size(1);
  // A sequence starts at each row's first slot and wherever the document id
  // changes (a new document, or the padding after the last one).
  at::Tensor starts = at::ones({b, t}, document_ids.options().dtype(at::kBool));
  if (t > 1) {
    starts.narrow(1, 1, t - 1).copy_(document_ids.narrow(1, 1, t - 1) != document_ids.narrow(1, 0, t - 1));
  }
  const at::Tensor offsets = starts.reshape({-1}).nonzero().squeeze(1);  // the one read back: S
  return at::cat({offsets, at::full({1}, b * t, offsets.options())}).to(at::kInt);
}

at::Tensor packed_flash_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                  const at::Tensor& cu_seqlens) {
  TORCH_CHECK(packed_flash_attention_applies(q.device(), q.scalar_type(), q.size(-1)),
              "packed_flash_attention: needs LibTorch >= 2.5 and a CUDA ",
              "bfloat16/float16 query with head_dim a multiple of 8 up to 256, got ", q.scalar_type(), " on ",
              q.device(), " with head_dim ", q.size(-1));
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5)
  const int64_t b = q.size(0), heads = q.size(1), t = q.size(2), d = q.size(3);
  // The longest document is at most a row: an upper bound is what the kernel
  // needs (it sizes its grid by it; blocks past a document's end exit early).
  const auto out = at::_flash_attention_forward(token_major(q), token_major(k), token_major(v), cu_seqlens, cu_seqlens,
                                                t, t, /*dropout_p=*/0.0, /*is_causal=*/true,
                                                /*return_debug_mask=*/false);
  return std::get<0>(out).view({b, t, heads, d}).transpose(1, 2);  // [B, heads, T, d]
#else
  (void)k;
  (void)v;
  (void)cu_seqlens;
  return q;
#endif
}

}  // namespace ptrain::model
