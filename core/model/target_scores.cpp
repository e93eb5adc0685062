#include "core/model/target_scores.h"

#include "core/log/step_phases.h"
#include "core/model/gemm.h"
#include "core/model/kernel_route.h"
#include "core/model/loss_head_chunks.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>

namespace ptrain::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct TargetScoresFunction : public torch::autograd::Function<TargetScoresFunction> {
  // → {log_probs [M], is_argmax [M], entropy [M] or [0]}
  static variable_list forward(AutogradContext* ctx, const at::Tensor& hidden, const at::Tensor& weight,
                               const at::Tensor& targets, bool with_entropy, int64_t chunk_rows, int64_t operand_type) {
    const log::PhaseScope phase(log::StepPhase::kLossHead);
    const auto operands = static_cast<at::ScalarType>(operand_type);
    const at::Tensor weight_operand = weight.to(operands);  // rounded once, not per chunk
    const int64_t rows = hidden.size(0);
    at::Tensor log_probs = at::empty({rows}, hidden.options());
    at::Tensor log_normalizers = at::empty({rows}, hidden.options());
    at::Tensor is_argmax = at::empty({rows}, hidden.options().dtype(at::kBool));
    at::Tensor entropy = at::empty({with_entropy ? rows : 0}, hidden.options());
    for (int64_t start = 0; start < rows; start += chunk_rows) {
      const int64_t n = std::min(chunk_rows, rows - start);
      const at::Tensor target = targets.narrow(0, start, n).unsqueeze(1);                             // [n, 1]
      const at::Tensor logits = model::mm(hidden.narrow(0, start, n), weight_operand.t(), operands);  // [n, V]
      const at::Tensor log_normalizer = at::logsumexp(logits, {1});                                   // [n]
      log_normalizers.narrow(0, start, n).copy_(log_normalizer);
      log_probs.narrow(0, start, n).copy_(logits.gather(1, target).squeeze(1) - log_normalizer);
      is_argmax.narrow(0, start, n).copy_(logits.argmax(1) == target.squeeze(1));
      if (with_entropy) {
        // H = logsumexp(z) − Σ softmax(z)·z
        entropy.narrow(0, start, n).copy_(log_normalizer - (at::softmax(logits, 1) * logits).sum(1));
      }
    }
    ctx->save_for_backward({hidden, weight, targets, log_normalizers});
    ctx->saved_data["chunk_rows"] = chunk_rows;
    ctx->saved_data["operands"] = operand_type;
    ctx->mark_non_differentiable({is_argmax, entropy});
    return {log_probs, is_argmax, entropy};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const log::PhaseScope phase(log::StepPhase::kLossHead);
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& hidden = saved[0];
    const at::Tensor& weight = saved[1];
    const at::Tensor& targets = saved[2];
    const at::Tensor& log_normalizers = saved[3];
    const int64_t chunk_rows = ctx->saved_data["chunk_rows"].toInt();
    const auto operands = static_cast<at::ScalarType>(ctx->saved_data["operands"].toInt());
    const at::Tensor weight_operand = weight.to(operands);
    const at::Tensor& grad_log_probs = grad_outputs[0];  // [M]
    const bool want_hidden = ctx->needs_input_grad(0), want_weight = ctx->needs_input_grad(1);

    at::Tensor grad_hidden = want_hidden ? at::empty_like(hidden) : at::Tensor();
    at::Tensor grad_weight = want_weight ? at::zeros_like(weight) : at::Tensor();
    const int64_t rows = hidden.size(0);
    for (int64_t start = 0; start < rows; start += chunk_rows) {
      const int64_t n = std::min(chunk_rows, rows - start);
      const at::Tensor h = hidden.narrow(0, start, n).to(operands);  // rounded once for both products
      const at::Tensor g = grad_log_probs.narrow(0, start, n).unsqueeze(1);  // [n, 1]
      // dz = g · (onehot(target) − softmax(z)), softmax from the saved logsumexp,
      // in place: one [n, V] float32 block at a time.
      at::Tensor grad_logits = model::mm(h, weight_operand.t(), operands);
      grad_logits.sub_(log_normalizers.narrow(0, start, n).unsqueeze(1)).exp_();
      grad_logits.mul_(-g).scatter_add_(1, targets.narrow(0, start, n).unsqueeze(1), g);
      // Rounded to the operand dtype once for both products.
      const at::Tensor grad_operand = grad_logits.to(operands);
      if (want_hidden) grad_hidden.narrow(0, start, n).copy_(model::mm(grad_operand, weight_operand, operands));
      if (want_weight) grad_weight.add_(model::mm(grad_operand.t(), h, operands));
    }
    return {grad_hidden, grad_weight, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

TargetScores score_target_rows(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& targets,
                               bool with_entropy, int64_t chunk_rows, at::ScalarType operands) {
  TORCH_CHECK(hidden.dim() == 2 && weight.dim() == 2 && hidden.size(1) == weight.size(1),
              "score_target_rows: hidden [M, H] and weight [V, H] expected, got ", hidden.sizes(), " and ",
              weight.sizes());
  TORCH_CHECK(targets.dim() == 1 && targets.size(0) == hidden.size(0) && targets.scalar_type() == at::kLong,
              "score_target_rows: targets must be [M] int64 with M = ", hidden.size(0), ", got ", targets.sizes(), " ",
              targets.scalar_type());
  if (chunk_rows <= 0) chunk_rows = loss_head_chunk_rows(hidden.size(0), weight.size(0), takes_cpu_kernels(hidden));
  const variable_list out = TargetScoresFunction::apply(hidden.contiguous(), weight, targets.contiguous(), with_entropy,
                                                        chunk_rows, static_cast<int64_t>(operands));
  TargetScores scores;
  scores.log_probs = out[0];
  scores.is_argmax = out[1];
  if (with_entropy) scores.entropy = out[2];
  return scores;
}

TargetScores score_masked_targets(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& target_ids,
                                  const at::Tensor& loss_mask, bool with_entropy, at::ScalarType operands) {
  const int64_t b = target_ids.size(0), t = target_ids.size(1);
  const at::Tensor all_rows = hidden.reshape({b * t, hidden.size(-1)});  // [B·T, H]
  const at::Tensor mask = loss_mask.reshape({-1});                       // [B·T]
  TargetScores out;
  if (!takes_cpu_kernels(hidden)) {
    const at::Tensor untrained = mask.logical_not();
    const TargetScores scores = score_target_rows(all_rows, weight, target_ids.reshape({-1}).masked_fill(untrained, 0),
                                                  with_entropy, 0, operands);
    out.log_probs = scores.log_probs.masked_fill(untrained, 0.0).view({b, t});
    out.is_argmax = scores.is_argmax.logical_and(mask).view({b, t});
    if (with_entropy) out.entropy = scores.entropy.masked_fill(untrained, 0.0).view({b, t});
    return out;
  }
  const at::Tensor rows = mask.nonzero().squeeze(1);  // [M] int64, row-major order
  const TargetScores scores = score_target_rows(all_rows.index_select(0, rows), weight,
                                                target_ids.reshape({-1}).index_select(0, rows), with_entropy, 0,
                                                operands);
  // Back to [B, T] at `rows`, zeros elsewhere. index_copy rather than
  // masked_scatter, whose backward (masked_select) reads its output size back.
  const auto scatter = [&](const at::Tensor& values, const at::TensorOptions& options) {
    return at::zeros({b * t}, options).index_copy(0, rows, values).view({b, t});
  };
  out.log_probs = scatter(scores.log_probs, hidden.options());
  out.is_argmax = scatter(scores.is_argmax, hidden.options().dtype(at::kBool));
  if (with_entropy) out.entropy = scatter(scores.entropy, hidden.options().requires_grad(false));
  return out;
}

}  // namespace ptrain::model
