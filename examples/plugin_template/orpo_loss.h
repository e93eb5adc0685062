// ORPO: odds-ratio preference optimisation (Hong, Lee, Thorne 2024,
// "ORPO: Monolithic Preference Optimization without Reference Model").
//
// For a pair (x, y_w, y_l), with the length-normalised log-likelihood
//   a(y) = (1/|y|) Σ_t log π(y_t | x, y_<t)        (≤ 0)
// and the odds odds(y) = P/(1 − P), P = exp(a(y)):
//   log odds(y) = a(y) − log(1 − exp(a(y)))
//   L_OR  = −log σ( log odds(y_w) − log odds(y_l) )
//   L_SFT = −a(y_w)                                (mean NLL per chosen token)
//   ℓ     = L_SFT + λ · L_OR
// The unit is a pair: a microbatch adds S = Σ_i ℓ_i and n = its pair count,
// so the step loss is ℓ averaged over the global batch's pairs (the paper's
// expectation over pairs), whatever the split. No reference model.
#pragma once

#include "ptrain/sdk/batch.h"
#include "ptrain/sdk/tokenizer.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string_view>
#include <vector>

namespace orpo {

struct PairLosses {
  at::Tensor loss;             // [B] float64: ℓ_i (differentiable)
  at::Tensor nll_chosen;       // [B] float64: L_SFT,i
  at::Tensor odds_ratio_loss;  // [B] float64: L_OR,i
  at::Tensor log_odds_ratio;   // [B] float64: log odds(y_w) − log odds(y_l)
};

// chosen_mean_logp, rejected_mean_logp: [B] float, a(y_w) and a(y_l).
PairLosses orpo_losses(const at::Tensor& chosen_mean_logp, const at::Tensor& rejected_mean_logp, double lambda);

// One pair as token ids: <bos> (if any) and the kept prompt tokens, and each
// completion with <eos>. When it does not fit max_length, the prompt keeps its
// last tokens and the completions their first ones; each keeps ≥ 1 token.
struct TokenizedPair {
  std::vector<int64_t> prompt;
  std::vector<int64_t> chosen;
  std::vector<int64_t> rejected;
  bool truncated = false;
};

TokenizedPair tokenize_pair(const ptrain::sdk::Tokenizer& tokenizer, std::string_view prompt, std::string_view chosen,
                            std::string_view rejected, int64_t max_length);

// One forward batch of 2B rows: the chosen sequences (rows 0..B−1), then the
// rejected ones; loss_mask marks the positions that predict a completion token.
ptrain::sdk::TokenBatch collate_pairs(const std::vector<TokenizedPair>& pairs, int64_t pad_id);

}  // namespace orpo
