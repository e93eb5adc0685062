// Attention over packed rows on CUDA as flash attention's variable-length
// form: the [B, T] tokens flattened into one sequence of documents, each
// attended causally within itself, located by cumulative start offsets
// (cu_seqlens), the layout flash-attn's varlen kernels read. No [T, T] mask
// is built, and causal blocks above the diagonal of each document are
// skipped, as for unpacked rows. The kernel is row-wise: a query's output
// depends only on its own document's keys, never on the rows beside it.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>

namespace ptrain::model {

// LibTorch offers the kernel (>= 2.5) and attention can take it: on CUDA, in
// bfloat16 or float16 (bf16-mixed), head_dim a multiple of 8, at most 256.
bool packed_flash_attention_applies(at::Device device, at::ScalarType dtype, int64_t head_dim);

// document_ids: [B, T] int64 (sdk::TokenBatch: 0, 1, ... per document, -1 on
// padding) → [S + 1] int32 offsets into the flattened B·T tokens where each
// of the S documents (and each row's padding run) starts, then B·T. Reads
// the document count back to the host: one read per packed forward.
at::Tensor packed_sequence_starts(const at::Tensor& document_ids);

// q: [B, heads, T, d]; k, v: [B, kv_heads, T, d] (kv_heads dividing heads: a
// query head reads kv head j / (heads / kv_heads), without copies);
// cu_seqlens from packed_sequence_starts. Scale 1/√d, causal within each
// document. Differentiable. → [B, heads, T, d] in q's dtype.
at::Tensor packed_flash_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                  const at::Tensor& cu_seqlens);

}  // namespace ptrain::model
