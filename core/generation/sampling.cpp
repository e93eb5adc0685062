#include "core/generation/sampling.h"

#include <ATen/ATen.h>

namespace ptrain::generation {

at::Tensor context_mask(const std::vector<const std::vector<int64_t>*>& contexts, int64_t vocab,
                        const at::TensorOptions& options) {
  at::Tensor seen = at::zeros({static_cast<int64_t>(contexts.size()), vocab}, at::kBool);
  for (size_t i = 0; i < contexts.size(); ++i) {
    if (!contexts[i]->empty()) seen[static_cast<int64_t>(i)].index_fill_(0, at::tensor(*contexts[i], at::kLong), true);
  }
  return seen.to(options.device());
}

at::Tensor penalize_repetitions(const at::Tensor& logits, const at::Tensor& seen, double penalty) {
  if (penalty == 1.0 || !seen.defined()) return logits;
  const at::Tensor penalized = at::where(logits > 0, logits / penalty, logits * penalty);
  return at::where(seen, penalized, logits);
}

at::Tensor sampling_distribution(const at::Tensor& logits, const sdk::SamplingParams& params) {
  TORCH_CHECK(params.temperature > 0.0, "sampling needs temperature > 0, got ", params.temperature);
  TORCH_CHECK(logits.dim() == 1 || logits.dim() == 2, "logits must be [V] or [B, V], got ", logits.sizes());
  if (logits.dim() == 1) return sampling_distribution(logits.unsqueeze(0), params).squeeze(0);
  const at::Tensor scaled = logits.to(at::kDouble) / params.temperature;
  const at::Tensor probs = at::softmax(scaled, 1);
  const int64_t vocab = probs.size(1);
  at::Tensor keep = at::ones_like(probs, probs.options().dtype(at::kBool));

  if (params.top_k > 0 && params.top_k < vocab) {
    const at::Tensor kth = std::get<0>(at::topk(scaled, params.top_k, 1)).narrow(1, params.top_k - 1, 1);
    keep &= scaled >= kth;
  }
  if (params.top_p < 1.0) {
    // Mass of the tokens before each one in decreasing order, over what top-k kept.
    const at::Tensor kept = at::where(keep, probs, at::zeros_like(probs));
    const at::Tensor normalized = kept / kept.sum(1, /*keepdim=*/true);
    const auto [sorted, order] = at::sort(normalized, 1, /*descending=*/true);
    const at::Tensor preceding = at::cumsum(sorted, 1) - sorted;
    keep &= at::zeros_like(keep).scatter_(1, order, preceding < params.top_p);
  }
  if (params.min_p > 0.0) keep &= probs >= params.min_p * std::get<0>(probs.max(1, /*keepdim=*/true));

  const at::Tensor filtered = at::where(keep, probs, at::zeros_like(probs));
  return filtered / filtered.sum(1, /*keepdim=*/true);
}

at::Tensor choose_next_tokens(const at::Tensor& logits, const at::Tensor& seen, const sdk::SamplingParams& params,
                              const at::Tensor& uniforms) {
  TORCH_CHECK(logits.dim() == 2, "logits must be [B, V], got ", logits.sizes());
  const at::Tensor penalized = penalize_repetitions(logits, seen, params.repetition_penalty);
  if (params.temperature == 0.0) return penalized.argmax(1);
  TORCH_CHECK(uniforms.dim() == 1 && uniforms.size(0) == logits.size(0), "uniforms must be [", logits.size(0),
              "], got ", uniforms.sizes());
  const at::Tensor cdf = at::cumsum(sampling_distribution(penalized, params), 1);  // [B, V]
  const at::Tensor u = uniforms.to(cdf.device(), at::kDouble).unsqueeze(1);
  // The first token whose cumulative mass exceeds u; the last kept one if
  // rounding leaves u above all of them.
  const at::Tensor drawn = (cdf <= u).sum(1);
  const at::Tensor kept = at::diff(cdf, 1, 1, at::zeros_like(cdf.narrow(1, 0, 1))) > 0;  // mass added at each id
  const int64_t vocab = cdf.size(1);
  const at::Tensor last_kept = (vocab - 1) - kept.flip({1}).to(at::kInt).argmax(1);
  return at::minimum(drawn, last_kept);
}

}  // namespace ptrain::generation
