// Attention kernels by LibTorch version (tested: 1.13 on Debian bookworm, 2.6
// on trixie), so the model reads the same on both.
#pragma once

#include "core/model/attention_varlen.h"
#include "core/model/gemm.h"
#include "core/model/kernel_route.h"

#include <ATen/ATen.h>
#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

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

// How many blocks of query rows the unfused path splits T into: blocks of at
// least 64 rows (smaller ones cost more in extra small ops than they save),
// at most 4 (the fifth saves 2.5% of the product for five more sets of ops).
inline int64_t causal_query_blocks(int64_t t) { return std::max<int64_t>(1, std::min<int64_t>(4, t / 64)); }

// q: [B, heads, T, d], times query_scale(d); k, v: [B, kv_heads, T, d], kv_heads dividing heads:
// query head j reads kv head j / (heads / kv_heads), as transformers' repeat_kv.
// allowed: [B, 1, T, T] (or [1, 1, T, T]) bool, true where a query may read a
// key; undefined means plain causal attention. blocked: its negation, or the causal [T, T]
// upper triangle — what the unfused path masks, built once per forward.
// sequence_starts: packed rows on CUDA (attention_varlen.h), which then
// replace `allowed`; undefined otherwise.
// `operands`: what the products read under bf16-mixed. On the CPU route
// (kernel_route.h) the unfused path's two products read bfloat16 through
// model::batched_matmul with float32 results, so a row's scores do not
// depend on the rows beside it, and the fused CPU kernel takes float32
// operands (its bfloat16 output would be rounded). On the accelerator
// route the fused kernel reads bfloat16, which is what lets CUDA pick its
// flash or cuDNN kernels (float32 rules both out); they are row-wise, so a
// split of the batch changes a row's result only by float rounding. The
// softmax statistics stay float32 inside every kernel; the result is float32.
inline at::Tensor attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& allowed,
                         const at::Tensor& blocked, at::ScalarType operands = at::kFloat,
                         const at::Tensor& sequence_starts = {}) {
  const int64_t b = q.size(0);
  const int64_t heads = q.size(1);
  const int64_t t = q.size(2);
  const int64_t d = q.size(3);
  const int64_t kv_heads = k.size(1);
  const int64_t group = heads / kv_heads;
#if TORCH_VERSION_MAJOR >= 2
  (void)blocked;
  const at::ScalarType kernel_dtype = takes_cpu_kernels(q) ? at::kFloat : operands;
  const at::Tensor q_in = q.to(kernel_dtype), k_in = k.to(kernel_dtype), v_in = v.to(kernel_dtype);
  if (sequence_starts.defined()) return packed_flash_attention(q_in, k_in, v_in, sequence_starts).to(at::kFloat);
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5)
  // Grouped heads read in place (enable_gqa, LibTorch >= 2.5): the flash
  // kernels take it; a masked call keeps the copies below, because the
  // kernel that takes masks on CUDA (memory-efficient attention) has no
  // grouped form and SDPA would fall back to its unfused math.
  if (!allowed.defined()) {
    return at::scaled_dot_product_attention(q_in, k_in, v_in, {}, 0.0, /*is_causal=*/true, std::nullopt,
                                            /*enable_gqa=*/group > 1)
        .to(at::kFloat);
  }
#endif
  auto repeat = [&](const at::Tensor& x) {
    return group == 1 ? x : x.unsqueeze(2).expand({b, kv_heads, group, t, d}).reshape({b, heads, t, d});
  };
  if (!allowed.defined()) {
    return at::scaled_dot_product_attention(q_in, repeat(k_in), repeat(v_in), {}, 0.0, /*is_causal=*/true)
        .to(at::kFloat);
  }
  return at::scaled_dot_product_attention(q_in, repeat(k_in), repeat(v_in), allowed).to(at::kFloat);
#else
  (void)allowed;
  (void)sequence_starts;
  // Every mask here is causal (packed rows and sliding windows only block
  // more), so the queries
  // of rows [s, e) never read a key at or after e: attention runs per block of
  // query rows over the keys before the block's end, and the [T, T] product,
  // mask and softmax shrink to about (n + 1) / 2n of their size for n blocks.
  // The keys skipped are the ones the full form masks to exact zeros.
  const int64_t blocks = causal_query_blocks(t);
  // The query heads that share a kv head are stacked into one [group·rows, d]
  // matrix, so keys and values are read in place rather than copied per query
  // head, and each product is one larger matmul.
  const at::Tensor grouped_q = q.view({b, kv_heads, group, t, d});
  std::vector<at::Tensor> outputs;
  outputs.reserve(blocks);
  for (int64_t block = 0; block < blocks; ++block) {
    const int64_t start = t * block / blocks;
    const int64_t rows = t * (block + 1) / blocks - start;
    const int64_t keys = start + rows;
    const at::Tensor block_q = grouped_q.narrow(3, start, rows).reshape({b, kv_heads, group * rows, d});
    const at::Tensor block_k = k.narrow(2, 0, keys);
    const at::Tensor block_v = v.narrow(2, 0, keys);
    const at::Tensor scores =
        batched_matmul(block_q, block_k.transpose(-2, -1), operands).view({b, kv_heads, group, rows, keys});
    // [B or 1, 1, 1, rows, keys] for packed rows or a window, [rows, keys] otherwise.
    const at::Tensor mask = blocked.dim() == 4 ? blocked.narrow(2, start, rows).narrow(3, 0, keys).unsqueeze(2)
                                               : blocked.narrow(0, start, rows).narrow(1, 0, keys);
    const at::Tensor probs = at::softmax(scores.masked_fill(mask, -std::numeric_limits<float>::infinity()), -1);
    outputs.push_back(batched_matmul(probs.view({b, kv_heads, group * rows, keys}), block_v, operands)
                          .view({b, kv_heads, group, rows, d}));
  }
  const at::Tensor out = blocks == 1 ? outputs.front() : at::cat(outputs, 3);
  return out.view({b, heads, t, d});
#endif
}

}  // namespace ptrain::model::attention_compat
