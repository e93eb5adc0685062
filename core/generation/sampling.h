// One next-token choice from logits, with transformers' processors in its
// order: repetition penalty (Keskar et al. 2019, CTRL), temperature, top-k,
// top-p (nucleus, Holtzman et al. 2020), min-p (Nguyen et al. 2024).
#pragma once

#include "ptrain/sdk/generation.h"

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace ptrain::generation {

// The repetition penalty θ on every token id in `context` (prompt and
// completion so far): z / θ where z > 0, z · θ otherwise. logits: [V] float32.
at::Tensor penalize_repetitions(const at::Tensor& logits, const std::vector<int64_t>& context, double penalty);

// The distribution sampling draws from: softmax(z / temperature) restricted
// to the tokens top-k, top-p and min-p keep, renormalised. logits: [V]
// (already penalised) → [V] float64 summing to 1. Needs temperature > 0.
//   top-k: the k largest logits (ties at the k-th all kept)
//   top-p: in order of decreasing p, every token whose preceding mass is < top_p
//   min-p: tokens with p ≥ min_p · max p (p after temperature, before top-k/top-p)
at::Tensor sampling_distribution(const at::Tensor& logits, const sdk::SamplingParams& params);

// The next token: the argmax of the penalised logits when temperature is 0,
// else one inverse-CDF draw from sampling_distribution with `generator`.
int64_t choose_next_token(const at::Tensor& logits, const std::vector<int64_t>& context,
                          const sdk::SamplingParams& params, at::Generator& generator);

}  // namespace ptrain::generation
