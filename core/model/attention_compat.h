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

// q: [B, heads, T, d]; k, v: [B, heads, T, d] (kv heads already repeated).
// allowed: [B, 1, T, T] bool, true where a query may read a key; undefined
// means plain causal attention. blocked: its negation, or the causal [T, T]
// upper triangle — what the unfused path masks, built once per forward.
inline at::Tensor attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& allowed,
                         const at::Tensor& blocked) {
#if TORCH_VERSION_MAJOR >= 2
  (void)blocked;
  if (!allowed.defined()) return at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);
  return at::scaled_dot_product_attention(q, k, v, allowed);
#else
  (void)allowed;
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  const at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) * scale;
  const at::Tensor probs = at::softmax(scores.masked_fill(blocked, -std::numeric_limits<float>::infinity()), -1);
  return at::matmul(probs, v);
#endif
}

}  // namespace ptrain::model::attention_compat
