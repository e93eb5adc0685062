// The pure functions of the DPO plugin: sequence log-probs and the per-pair
// preference losses, each written once here (papers in docs/dpo.md).
//
// Notation, per pair i with prompt x, chosen y_c and rejected y_r:
//   π_c = log π(y_c|x), π_r = log π(y_r|x)     sums over completion tokens (incl. <eos>)
//   ρ_c, ρ_r                                   the same under the reference (0 when reference-free)
//   π̄ = π/|y|, ρ̄ = ρ/|y|                       token means, |y| = trained completion tokens
//   h_c = π_c − ρ_c, h_r = π_r − ρ_r           log-ratios;  z = h_c − h_r;  z̄ = (π̄_c − ρ̄_c) − (π̄_r − ρ̄_r)
//   σ = logistic, ε = label_smoothing, β = beta
// With LD-DPO (ld_alpha = α < 1), every sum is Σ_{k<m} lp_k + α Σ_{k≥m} lp_k
// with m = min(|y_c|, |y_r|) (Liu et al. 2024); token means divide that by |y|.
//
//   sigmoid       −(1−ε) log σ(βz) − ε log σ(−βz)                          DPO; cDPO for ε > 0
//   sigmoid_norm  the same with z̄                                           open-instruct's dpo_norm
//   robust        (−(1−ε) log σ(βz) + ε log σ(−βz)) / (1 − 2ε)             rDPO
//   hinge         max(0, 1 − βz)                                           SLiC-HF
//   ipo           (z̄ − 1/(2β))²                                            IPO
//   exo_pair      σ(βz)(log σ(βz) − log(1−ε')) + σ(−βz)(log σ(−βz) − log ε'), ε' = ε or 1e-3 if ε = 0   EXO
//   nca_pair      −log σ(βh_c) − ½ log σ(−βh_c) − ½ log σ(−βh_r)          NCA
//   bco_pair      −log σ(βh_c − δ) − log σ(−(βh_r − δ)), δ = running mean of past rewards   BCO
//   sppo_hard     (h_c − 1/(2β))² + (h_r + 1/(2β))²                         SPPO (hard labels)
//   apo_zero      (1 − σ(βh_c)) + σ(βh_r)                                   APO-zero
//   apo_down      σ(βh_c) + (1 − σ(βz))                                     APO-down
//   discopop      (1 − σ(βz/τ))·(−log σ(βz)) + σ(βz/τ)·exp(−βz)           DiscoPOP
//   simpo         −(1−ε) log σ(u) − ε log σ(−u), u = β(π̄_c − π̄_r) − γ       SimPO (ignores ρ)
// The `sft` term is not a pair loss: it is the NLL of the chosen completion,
// a token mean over the global batch (dpo_module.h).
#pragma once

#include "dpo_config.h"

#include <ATen/core/Tensor.h>

namespace ptrain::dpo {

// A side's sequence log-probs, split at LD-DPO's shared length. [R] each,
// differentiable, dtype of the token log-probs.
struct SequenceLogProbParts {
  at::Tensor shared;  // Σ over the first min(|y_c|, |y_r|) completion tokens
  at::Tensor rest;    // Σ over the remaining ones
};

// token_log_probs: [R, T] float, 0 outside loss_mask; loss_mask, shared_mask: [R, T] bool.
// sequence_ids undefined: row r is sequence r, parts [R]. Packed rows:
// sequence_ids [R, T] int64 names each position's sequence in
// [0, num_sequences) (−1 on padding), parts [num_sequences].
SequenceLogProbParts sequence_log_prob_parts(const at::Tensor& token_log_probs, const at::Tensor& loss_mask,
                                             const at::Tensor& shared_mask, const at::Tensor& sequence_ids = {},
                                             int64_t num_sequences = 0);

// shared + α·rest. [R]
at::Tensor combine_parts(const SequenceLogProbParts& parts, double ld_alpha);

// Everything a pair loss reads; [B] float64 each.
struct PairLogProbs {
  at::Tensor policy_chosen;  // π_c (differentiable)
  at::Tensor policy_rejected;
  at::Tensor reference_chosen;  // ρ_c
  at::Tensor reference_rejected;
  at::Tensor chosen_tokens;  // |y_c|
  at::Tensor rejected_tokens;
};

struct LossParams {
  double beta = 0.1;
  double label_smoothing = 0.0;
  double gamma = 0.5;
  double discopop_tau = 0.05;
  double bco_delta = 0.0;  // δ of bco_pair
};

// The parameters a config sets; bco_delta is bco_pair's running mean (dpo_bco.h).
LossParams loss_params(const DpoConfig& config, double bco_delta);

// ℓ_i of each pair for one loss type (not kSft). [B] float64.
at::Tensor pair_loss(LossType type, const PairLogProbs& logps, const LossParams& params);

// Losses that compare token means rather than sums.
bool is_length_normalised(LossType type);

// Implicit rewards β(log π − log π_ref) per pair, detached, in the log-prob
// form (sum or token mean) of `form`. [B] float64 each.
struct PairRewards {
  at::Tensor chosen;
  at::Tensor rejected;
};
PairRewards pair_rewards(LossType form, const PairLogProbs& logps, double beta);

// WPO (Zhou et al. 2024, eq. 2 as TRL computes it): per row, the mean over
// trained positions of log p(target) − log Σ_v p_v², from full logits.
// logits: [R, T, V]; target_ids, loss_mask: [R, T]. → [R] float64, no gradient.
at::Tensor wpo_adjusted_log_prob_means(const at::Tensor& logits, const at::Tensor& target_ids,
                                       const at::Tensor& loss_mask);

// w_i = min(1, exp(a_c + a_r)) from the row means above. [B] float64.
at::Tensor wpo_pair_weights(const at::Tensor& chosen_means, const at::Tensor& rejected_means);

}  // namespace ptrain::dpo
