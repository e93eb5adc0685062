// Attention kernels by LibTorch version (tested: 1.13 on Debian bookworm, 2.6
// on trixie), so the model reads the same on both.
#pragma once

#include <ATen/ATen.h>
#include <torch/version.h>

#include <cmath>
#include <limits>

namespace ptrain::model::attention_compat {

// LibTorch 2.0 added at::scaled_dot_product_attention: fused kernels that
// take causality as a flag (no [T, T] mask) and never keep the [T, T]
// probabilities for backward. 1.13 has only a private, unfused version, so
// there ptrain computes softmax(q·kᵀ/√d)·v itself.
#if TORCH_VERSION_MAJOR >= 2
inline constexpr bool kFusedAttention = true;
#else
inline constexpr bool kFusedAttention = false;
#endif

// What attend() expects the queries to be multiplied by: the fused kernel
// applies 1/√d itself; the unfused path takes it on the queries ([T, d])
// rather than on the scores ([T, T]), one pass fewer over the largest tensor,
// and the rotary kernel that writes the queries folds it in for free.
inline double query_scale(int64_t head_dim) {
  return kFusedAttention ? 1.0 : 1.0 / std::sqrt(static_cast<double>(head_dim));
}

// q: [B, heads, T, d], times query_scale(d); k, v: [B, kv_heads, T, d], kv_heads dividing heads:
// query head j reads kv head j / (heads / kv_heads), as transformers' repeat_kv.
// allowed: [B, 1, T, T] bool, true where a query may read a key; undefined
// means plain causal attention. blocked: its negation, or the causal [T, T]
// upper triangle — what the unfused path masks, built once per forward.
inline at::Tensor attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& allowed,
                         const at::Tensor& blocked) {
  const int64_t b = q.size(0);
  const int64_t heads = q.size(1);
  const int64_t t = q.size(2);
  const int64_t d = q.size(3);
  const int64_t kv_heads = k.size(1);
  const int64_t group = heads / kv_heads;
#if TORCH_VERSION_MAJOR >= 2
  (void)blocked;
  auto repeat = [&](const at::Tensor& x) {
    return group == 1 ? x : x.unsqueeze(2).expand({b, kv_heads, group, t, d}).reshape({b, heads, t, d});
  };
  if (!allowed.defined()) return at::scaled_dot_product_attention(q, repeat(k), repeat(v), {}, 0.0, /*is_causal=*/true);
  return at::scaled_dot_product_attention(q, repeat(k), repeat(v), allowed);
#else
  (void)allowed;
  // The query heads that share a kv head are stacked into one [group·T, d]
  // matrix, so keys and values are read in place rather than copied per query
  // head, and each product is one larger matmul.
  const at::Tensor grouped_q = q.reshape({b, kv_heads, group * t, d});
  const at::Tensor scores = at::matmul(grouped_q, k.transpose(-2, -1)).view({b, kv_heads, group, t, t});
  const at::Tensor mask = blocked.dim() == 4 ? blocked.unsqueeze(2) : blocked;  // [B, 1, 1, T, T] or [T, T]
  const at::Tensor probs = at::softmax(scores.masked_fill(mask, -std::numeric_limits<float>::infinity()), -1);
  return at::matmul(probs.view({b, kv_heads, group * t, t}), v).view({b, heads, t, d});
#endif
}

}  // namespace ptrain::model::attention_compat
