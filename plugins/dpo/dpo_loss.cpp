#include "dpo_loss.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>

namespace ptrain::dpo {
namespace {

// DPO with label smoothing ε: −(1−ε) log σ(u) − ε log σ(−u).
at::Tensor smoothed_sigmoid_loss(const at::Tensor& u, double epsilon) {
  return -(1.0 - epsilon) * at::log_sigmoid(u) - epsilon * at::log_sigmoid(-u);
}

void check_pair_shapes(const PairLogProbs& logps) {
  const at::Tensor* all[] = {&logps.policy_chosen,      &logps.policy_rejected, &logps.reference_chosen,
                             &logps.reference_rejected, &logps.chosen_tokens,   &logps.rejected_tokens};
  const int64_t pairs = logps.policy_chosen.size(0);
  for (const at::Tensor* tensor : all) {
    TORCH_CHECK(tensor->defined() && tensor->dim() == 1 && tensor->size(0) == pairs,
                "pair log-probs must all be [B] with B = ", pairs, ", got ",
                tensor->defined() ? tensor->sizes() : at::IntArrayRef{});
  }
}

}  // namespace

SequenceLogProbParts sequence_log_prob_parts(const at::Tensor& token_log_probs, const at::Tensor& loss_mask,
                                             const at::Tensor& shared_mask, const at::Tensor& sequence_ids,
                                             int64_t num_sequences) {
  TORCH_CHECK(token_log_probs.dim() == 2 && token_log_probs.sizes() == loss_mask.sizes() &&
                  loss_mask.sizes() == shared_mask.sizes(),
              "token_log_probs ", token_log_probs.sizes(), ", loss_mask ", loss_mask.sizes(), " and shared_mask ",
              shared_mask.sizes(), " must all be [R, T]");
  const at::Tensor zeros = at::zeros_like(token_log_probs);
  // where() so that nothing outside the mask can leak in.
  const at::Tensor masked = at::where(loss_mask, token_log_probs, zeros);
  const at::Tensor shared_values = at::where(shared_mask, masked, zeros);
  const at::Tensor rest_values = at::where(shared_mask, zeros, masked);
  SequenceLogProbParts parts;
  if (!sequence_ids.defined()) {
    parts.shared = shared_values.sum(1);
    parts.rest = rest_values.sum(1);
    return parts;
  }
  TORCH_CHECK(sequence_ids.sizes() == token_log_probs.sizes() && sequence_ids.scalar_type() == at::kLong,
              "sequence_ids must be [R, T] int64 like token_log_probs ", token_log_probs.sizes(), ", got ",
              sequence_ids.sizes(), " ", sequence_ids.scalar_type());
  // Padding (−1) holds 0 in both value tensors, so any sequence may take it.
  const at::Tensor index = sequence_ids.reshape({-1}).clamp_min(0);
  const at::Tensor sums = at::zeros({num_sequences}, token_log_probs.options());
  parts.shared = sums.index_add(0, index, shared_values.reshape({-1}));
  parts.rest = sums.index_add(0, index, rest_values.reshape({-1}));
  return parts;
}

at::Tensor combine_parts(const SequenceLogProbParts& parts, double ld_alpha) {
  if (ld_alpha == 1.0) return parts.shared + parts.rest;
  return parts.shared + ld_alpha * parts.rest;
}

bool is_length_normalised(LossType type) {
  return type == LossType::kIpo || type == LossType::kSigmoidNorm || type == LossType::kSimpo;
}

LossParams loss_params(const DpoConfig& config, double bco_delta) {
  LossParams params;
  params.beta = config.beta;
  params.label_smoothing = config.label_smoothing;
  params.gamma = config.gamma;
  params.discopop_tau = config.discopop_tau;
  params.bco_delta = bco_delta;
  return params;
}

at::Tensor pair_loss(LossType type, const PairLogProbs& logps, const LossParams& params) {
  check_pair_shapes(logps);
  const double beta = params.beta;
  const double epsilon = params.label_smoothing;
  const at::Tensor h_c = logps.policy_chosen - logps.reference_chosen;
  const at::Tensor h_r = logps.policy_rejected - logps.reference_rejected;
  const at::Tensor z = h_c - h_r;
  const auto mean_z = [&] {
    return (logps.policy_chosen - logps.reference_chosen) / logps.chosen_tokens -
           (logps.policy_rejected - logps.reference_rejected) / logps.rejected_tokens;
  };
  switch (type) {
    case LossType::kSigmoid:
      return smoothed_sigmoid_loss(beta * z, epsilon);
    case LossType::kSigmoidNorm:
      return smoothed_sigmoid_loss(beta * mean_z(), epsilon);
    case LossType::kRobust:
      return (-(1.0 - epsilon) * at::log_sigmoid(beta * z) + epsilon * at::log_sigmoid(-beta * z)) /
             (1.0 - 2.0 * epsilon);
    case LossType::kHinge:
      return at::relu(1.0 - beta * z);
    case LossType::kIpo:
      return (mean_z() - 1.0 / (2.0 * beta)).pow(2);
    case LossType::kExoPair: {
      const double eps = epsilon > 0.0 ? epsilon : 1e-3;
      const at::Tensor u = beta * z;
      return at::sigmoid(u) * (at::log_sigmoid(u) - std::log1p(-eps)) +
             at::sigmoid(-u) * (at::log_sigmoid(-u) - std::log(eps));
    }
    case LossType::kNcaPair:
      return -at::log_sigmoid(beta * h_c) - 0.5 * at::log_sigmoid(-beta * h_c) - 0.5 * at::log_sigmoid(-beta * h_r);
    case LossType::kBcoPair:
      return -at::log_sigmoid(beta * h_c - params.bco_delta) - at::log_sigmoid(-(beta * h_r - params.bco_delta));
    case LossType::kSppoHard:
      return (h_c - 0.5 / beta).pow(2) + (h_r + 0.5 / beta).pow(2);
    case LossType::kApoZero:
      return (1.0 - at::sigmoid(beta * h_c)) + at::sigmoid(beta * h_r);
    case LossType::kApoDown:
      return at::sigmoid(beta * h_c) + (1.0 - at::sigmoid(beta * z));
    case LossType::kDiscopop: {
      const at::Tensor u = beta * z;
      const at::Tensor modulation = at::sigmoid(u / params.discopop_tau);
      return (1.0 - modulation) * -at::log_sigmoid(u) + modulation * at::exp(-u);
    }
    case LossType::kSimpo: {
      const at::Tensor u =
          beta * (logps.policy_chosen / logps.chosen_tokens - logps.policy_rejected / logps.rejected_tokens) -
          params.gamma;
      return smoothed_sigmoid_loss(u, epsilon);
    }
    case LossType::kSft:
      break;
  }
  TORCH_CHECK(false, "pair_loss: '", loss_type_name(type), "' is not a pair loss");
}

PairRewards pair_rewards(LossType form, const PairLogProbs& logps, double beta) {
  check_pair_shapes(logps);
  PairRewards rewards;
  rewards.chosen = beta * (logps.policy_chosen - logps.reference_chosen).detach();
  rewards.rejected = beta * (logps.policy_rejected - logps.reference_rejected).detach();
  if (is_length_normalised(form)) {
    rewards.chosen = rewards.chosen / logps.chosen_tokens;
    rewards.rejected = rewards.rejected / logps.rejected_tokens;
  }
  return rewards;
}

at::Tensor wpo_adjusted_log_prob_means(const at::Tensor& logits, const at::Tensor& target_ids,
                                       const at::Tensor& loss_mask) {
  TORCH_CHECK(logits.dim() == 3 && logits.size(0) == target_ids.size(0) && logits.size(1) == target_ids.size(1) &&
                  target_ids.sizes() == loss_mask.sizes(),
              "logits must be [R, T, V] over target_ids/loss_mask [R, T]; got ", logits.sizes(), ", ",
              target_ids.sizes(), ", ", loss_mask.sizes());
  const at::NoGradGuard no_grad;
  const at::Tensor log_probs = at::log_softmax(logits.to(at::kDouble), -1);  // [R, T, V]
  // Padding targets may lie outside the vocabulary; they are masked anyway.
  const at::Tensor safe_targets = at::where(loss_mask, target_ids, at::zeros_like(target_ids));
  const at::Tensor target_log_probs = log_probs.gather(2, safe_targets.unsqueeze(2)).squeeze(2);  // [R, T]
  const at::Tensor log_sum_squares = at::logsumexp(2.0 * log_probs, {2});                         // log Σ_v p_v²
  const at::Tensor adjusted =
      at::where(loss_mask, target_log_probs - log_sum_squares, at::zeros_like(target_log_probs));
  return adjusted.sum(1) / loss_mask.sum(1).to(at::kDouble).clamp_min(1.0);
}

at::Tensor wpo_pair_weights(const at::Tensor& chosen_means, const at::Tensor& rejected_means) {
  TORCH_CHECK(chosen_means.sizes() == rejected_means.sizes() && chosen_means.dim() == 1,
              "WPO row means must both be [B], got ", chosen_means.sizes(), " and ", rejected_means.sizes());
  return at::exp(chosen_means + rejected_means).clamp_max(1.0).detach();
}

}  // namespace ptrain::dpo
