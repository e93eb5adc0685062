// The per-token GRPO objective (DeepSeekMath eq. 3, with the clipping of
// PPO, Schulman et al. 2017), for completion token t of sequence i:
//   w_i,t  = π(y_t|…) / π_old(y_t|…)                       importance_sampling_level = token
//   w_i    = exp(Σ_t m·log(π/π_old) / Σ_t m)                sequence (GSPO, Zheng et al. 2025)
//   ℓ_i,t  = −min(w·A_i, clip(w, 1 − ε_low, 1 + ε_high)·A_i)   (clip-higher: DAPO, Yu et al. 2025)
//   dual-clip (Ye et al. 2020), A_i < 0:  ℓ_i,t = min(ℓ_i,t, −A_i·δ)
//   + β·KL_t with x = log π_ref − log π:
//       k1 = −x,  k2 = x²/2,  k3 = eˣ − x − 1          (Schulman 2020, "Approximating KL divergence")
// π_old is the policy that generated the rollouts: with num_iterations = 1
// it is the current policy detached, so w = 1 exactly and only its gradient
// remains. The step loss aggregates ℓ with the SDK's mode for loss_type.
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
  at::Tensor loss;          // [B, T] float64, ℓ (0 outside mask); differentiable
  at::Tensor ratio;         // [B, T] float64, w (detached)
  at::Tensor kl;            // [B, T] float64 (detached); undefined when β = 0
  at::Tensor low_clipped;   // [B, T] bool: w < 1 − ε_low with A < 0 (clip active)
  at::Tensor high_clipped;  // [B, T] bool: w > 1 + ε_high with A > 0
};

TokenLoss grpo_token_loss(const TokenLossInputs& inputs, const GrpoConfig& config);

}  // namespace ptrain::grpo
