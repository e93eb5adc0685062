// Next-token choice for a batch of rows at once, with transformers'
// processors in its order: repetition penalty (Keskar et al. 2019, CTRL),
// temperature, top-k, top-p (nucleus, Holtzman et al. 2020), min-p (Nguyen et
// al. 2024). Everything is batched tensor ops on the logits' device: the
// decoder reads the chosen tokens back once per step, not once per row.
#pragma once

#include "ptrain/sdk/generation.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace ptrain::generation {

// [B, V] bool on `options`' device: row i marks the ids in contexts[i]
// (prompt and completion so far), what the repetition penalty applies to.
at::Tensor context_mask(const std::vector<const std::vector<int64_t>*>& contexts, int64_t vocab,
                        const at::TensorOptions& options);

// The repetition penalty θ on the marked ids: z / θ where z > 0, z · θ
// otherwise. logits: [B, V] float32; seen: context_mask's [B, V].
at::Tensor penalize_repetitions(const at::Tensor& logits, const at::Tensor& seen, double penalty);

// The distribution sampling draws from, per row: softmax(z / temperature)
// restricted to the tokens top-k, top-p and min-p keep, renormalised.
// logits: [B, V] or [V] (already penalised) → float64 of the same shape,
// each row summing to 1. Needs temperature > 0.
//   top-k: the k largest logits (ties at the k-th all kept)
//   top-p: in order of decreasing p, every token whose preceding mass is < top_p
//   min-p: tokens with p ≥ min_p · max p (p after temperature, before top-k/top-p)
at::Tensor sampling_distribution(const at::Tensor& logits, const sdk::SamplingParams& params);

// The next token of every row: the argmax of the penalised logits when
// temperature is 0, else the inverse-CDF draw at uniforms[i] (in [0, 1), one
// per row from the row's own generator, so a row's tokens do not depend on
// the batch it is in). logits: [B, V]; seen: [B, V] or undefined when
// repetition_penalty is 1; uniforms: [B] float64 → [B] int64 on the logits' device.
at::Tensor choose_next_tokens(const at::Tensor& logits, const at::Tensor& seen, const sdk::SamplingParams& params,
                              const at::Tensor& uniforms);

}  // namespace ptrain::generation
