// The per-token GRPO objective (DeepSeekMath eq. 3), for completion token t
// of sequence i, with the importance ratio
//   w_i,t  = π(y_t|…) / π_old(y_t|…)                       importance_sampling_level = token
//   w_i    = exp(Σ_t m·log(π/π_old) / Σ_t m)                sequence (GSPO, Zheng et al. 2025)
// and one of three policy losses (policy_loss):
//   clip  (PPO, Schulman et al. 2017; clip-higher: DAPO, Yu et al. 2025):
//         ℓ = −min(w·A_i, clip(w, 1 − ε_low, 1 + ε_high)·A_i)
//         dual clip (Ye et al. 2020), A_i < 0: ℓ = min(ℓ, −A_i·δ)
//   cispo (MiniMax-M1, arXiv 2506.13585):
//         ℓ = −sg(clip(w, 1 − ε_low^IS, 1 + ε_high^IS))·A_i·log π(y_t|…)
//         the clipped weight is detached, so every token keeps the gradient
//         −ŵ·A_i·∇log π: none drops out as under PPO's clip.
//   sapo  (Soft Adaptive Policy Optimization, Qwen, arXiv 2511.20347):
//         ℓ = −f(w)·A_i,  f(w) = σ(τ·(w − 1))·4/τ,  τ = τ_pos if A_i > 0 else τ_neg
//         a smooth gate instead of the hard clip: ∂ℓ/∂log π = −4σ(1 − σ)·w·A_i,
//         which is −A_i at w = 1 and vanishes as w moves far from 1 (the
//         faster, the larger τ).
// plus β·KL_t with x = log π_ref − log π:
//       k1 = −x,  k2 = x²/2,  k3 = eˣ − x − 1          (Schulman 2020, "Approximating KL divergence")
// π_old is the policy that generated the rollouts: with num_iterations = 1
// it is the current policy detached, so w = 1 exactly and all three losses
// have the gradient −A_i·∇log π. The step loss aggregates ℓ with the SDK's
// mode for loss_type.
#pragma once

#include "grpo_config.h"

#include <ATen/core/Tensor.h>

namespace ptrain::grpo {

struct TokenLossInputs {
  at::Tensor log_probs;      // [B, T] float64, log π of each target (differentiable); 0 outside mask
  at::Tensor old_log_probs;  // [B, T] float64, log π_old; 0 outside mask
  at::Tensor ref_log_probs;  // [B, T] float64, log π_ref; undefined when β = 0
  at::Tensor advantages;     // [B] float64
  at::Tensor mask;           // [B, T] bool, completion tokens
};

struct TokenLoss {
  at::Tensor loss;   // [B, T] float64, ℓ (0 outside mask); differentiable
  at::Tensor ratio;  // [B, T] float64, w (detached)
  at::Tensor kl;     // [B, T] float64 (detached); undefined when β = 0
  // clip: w < 1 − ε_low with A < 0 / w > 1 + ε_high with A > 0 (the clip acts);
  // cispo: w < 1 − ε_low^IS / w > 1 + ε_high^IS (the weight is clipped); sapo: none.
  at::Tensor low_clipped;   // [B, T] bool
  at::Tensor high_clipped;  // [B, T] bool
};

TokenLoss grpo_token_loss(const TokenLossInputs& inputs, const GrpoConfig& config);

}  // namespace ptrain::grpo
