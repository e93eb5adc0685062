// log p(target) for the trained rows of a forward, a chunk of rows at a time.
//
//   log p = z[target] − logsumexp(z),  z = h·Wᵀ  (one row of logits)
//   ∂log p/∂z = onehot(target) − softmax(z)
//
// On the CPU route the forward keeps only logsumexp per row and the backward
// recomputes each chunk's logits, so neither pass holds more than one
// [chunk, V] block of logits — never the [rows × vocab] logits or
// log-softmax that autograd would otherwise keep (the idea of fused
// linear-cross-entropy kernels, e.g. Liger's). The accelerator route runs
// the fused log-softmax kernel and keeps its result for the backward when it
// fits the budget of loss_head_chunks.h: one product fewer, and fewer passes
// over [rows, V] in float32, which bound a GPU's time here. Either way the
// backward writes dz straight into the operand dtype, one rounding. The
// result equals logits + log_softmax + gather to float rounding.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace ptrain::model {

struct TargetScores {
  at::Tensor log_probs;  // [M] float32, differentiable in hidden and weight
  at::Tensor is_argmax;  // [M] bool: the target is the most likely token
  at::Tensor entropy;    // [M] float32 without gradient, or undefined unless asked for
};

// Whether the accelerator route may keep the forward's log-softmax for the
// backward (when it fits, loss_head_chunks.h), or must recompute as the CPU
// route does; kNever is for tests of that path. The CPU route never keeps it.
enum class LogSoftmaxReuse { kIfItFits, kNever };

// hidden: [M, H] float32; weight: [V, H] float32 (lm_head); targets: [M] int64.
// chunk_rows = 0 picks the route's chunk size (loss_head_chunks.h). `operands` is the
// dtype the logit products read (model::mm); logsumexp, softmax and the
// results stay float32.
TargetScores score_target_rows(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& targets,
                               bool with_entropy, int64_t chunk_rows = 0, at::ScalarType operands = at::kFloat,
                               LogSoftmaxReuse reuse = LogSoftmaxReuse::kIfItFits);

// The loss head of a batch: score_target_rows at the loss_mask positions of
// hidden [B, T, H] (weight [V, H]; target_ids [B, T] int64, in [0, V) where
// loss_mask [B, T] bool is set) → [B, T] results, zeros elsewhere. Which rows
// go through the head follows the route (kernel_route.h):
//   CPU route: only the trained ones, found with nonzero() on the mask (a
//     size read, free on the host);
//   accelerator route: every row, untrained ones with target 0 and their
//     results masked to zero (their gradient is zero). Nothing is read back
//     to the host, where a read would wait for the device's queued work once
//     per microbatch; the price is the head's products over the untrained
//     rows too (prompt tokens), as a PyTorch loop computes them.
// Row for row the same result either way.
TargetScores score_masked_targets(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& target_ids,
                                  const at::Tensor& loss_mask, bool with_entropy, at::ScalarType operands);

}  // namespace ptrain::model
