#include "core/generation/sampling.h"

#include <ATen/ATen.h>

#include <limits>

namespace ptrain::generation {

at::Tensor penalize_repetitions(const at::Tensor& logits, const std::vector<int64_t>& context, double penalty) {
  if (penalty == 1.0 || context.empty()) return logits;
  const at::Tensor ids = at::tensor(context, at::kLong);
  const at::Tensor seen = logits.index_select(0, ids);
  const at::Tensor penalized = at::where(seen > 0, seen / penalty, seen * penalty);
  return logits.clone().index_copy_(0, ids, penalized);
}

at::Tensor sampling_distribution(const at::Tensor& logits, const sdk::SamplingParams& params) {
  TORCH_CHECK(params.temperature > 0.0, "sampling needs temperature > 0, got ", params.temperature);
  TORCH_CHECK(logits.dim() == 1, "logits must be [V], got ", logits.sizes());
  const at::Tensor scaled = logits.to(at::kDouble) / params.temperature;
  const at::Tensor probs = at::softmax(scaled, 0);
  const int64_t vocab = probs.size(0);
  at::Tensor keep = at::ones({vocab}, at::kBool);

  if (params.top_k > 0 && params.top_k < vocab) {
    const at::Tensor kth = std::get<0>(at::topk(scaled, params.top_k)).select(0, params.top_k - 1);
    keep &= scaled >= kth;
  }
  if (params.top_p < 1.0) {
    // Mass of the tokens before each one in decreasing order, over what top-k kept.
    const at::Tensor kept = at::where(keep, probs, at::zeros_like(probs));
    const at::Tensor normalized = kept / kept.sum();
    const auto [sorted, order] = at::sort(normalized, 0, /*descending=*/true);
    const at::Tensor preceding = at::cumsum(sorted, 0) - sorted;
    keep &= at::zeros({vocab}, at::kBool).index_copy_(0, order, preceding < params.top_p);
  }
  if (params.min_p > 0.0) keep &= probs >= params.min_p * probs.max();

  const at::Tensor filtered = at::where(keep, probs, at::zeros_like(probs));
  return filtered / filtered.sum();
}

int64_t choose_next_token(const at::Tensor& logits, const std::vector<int64_t>& context,
                          const sdk::SamplingParams& params, at::Generator& generator) {
  const at::Tensor penalized = penalize_repetitions(logits, context, params.repetition_penalty);
  if (params.temperature == 0.0) return penalized.argmax().item<int64_t>();
  const at::Tensor cdf = at::cumsum(sampling_distribution(penalized, params), 0);
  const double u = at::empty({1}, at::kDouble).uniform_(0.0, 1.0, generator).item<double>();
  // The first token whose cumulative mass exceeds u; the last kept one if rounding leaves u above all.
  const int64_t drawn = (cdf <= u).sum().item<int64_t>();
  const at::Tensor positive = (at::diff(at::cat({at::zeros({1}, at::kDouble), cdf})) > 0).nonzero().view({-1});
  const int64_t last_kept = positive[-1].item<int64_t>();
  return std::min(drawn, last_kept);
}

}  // namespace ptrain::generation
