#include "core/model/target_scores.h"

#include "core/log/step_phases.h"
#include "core/model/gemm.h"
#include "core/model/kernel_route.h"
#include "core/model/loss_head_chunks.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>

namespace ptrain::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// How one call runs: fixed by score_target_rows, read by both passes.
struct HeadPlan {
  bool with_entropy = false;
  int64_t chunk_rows = 1;
  at::ScalarType operands = at::kFloat;
  bool cpu_route = true;          // logsumexp forward; else the fused log-softmax
  bool keep_log_softmax = false;  // the forward's log-softmax is kept for the backward
};

// A chunk's slices of the per-row results.
struct ChunkResults {
  at::Tensor log_probs;        // [n]
  at::Tensor log_normalizers;  // [n], written when the backward recomputes
  at::Tensor is_argmax;        // [n]
  at::Tensor entropy;          // [n] or undefined
};

// CPU route: logsumexp, and the softmax only if the entropy is asked for.
void score_by_normalizer(const at::Tensor& logits, const at::Tensor& target, const ChunkResults& out) {
  const at::Tensor log_normalizer = at::logsumexp(logits, {1});  // [n]
  out.log_normalizers.copy_(log_normalizer);
  out.log_probs.copy_(logits.gather(1, target).squeeze(1) - log_normalizer);
  if (out.entropy.defined()) {
    // H = logsumexp(z) − Σ softmax(z)·z
    out.entropy.copy_(log_normalizer - (at::softmax(logits, 1) * logits).sum(1));
  }
}

// Accelerator route: one fused log-softmax kernel over the chunk → [n, V],
// which the caller keeps for the backward or drops.
at::Tensor score_by_log_softmax(const at::Tensor& logits, const at::Tensor& target, const ChunkResults& out) {
  at::Tensor log_softmax = at::_log_softmax(logits, 1, /*half_to_float=*/false);
  out.log_probs.copy_(log_softmax.gather(1, target).squeeze(1));
  if (out.log_normalizers.defined()) out.log_normalizers.copy_(logits.gather(1, target).squeeze(1) - out.log_probs);
  if (out.entropy.defined()) out.entropy.copy_(-(log_softmax.exp() * log_softmax).sum(1));  // H = −Σ p·log p
  return log_softmax;
}

// dz = g · (onehot(target) − p) for a chunk's probabilities p [n, V] (a
// block of its own, overwritten) and gradients g [n, 1], written straight
// into the operand dtype, each entry rounded once from float32: −g·p, and
// −g·p + g at the target.
at::Tensor logit_gradient(at::Tensor probabilities, const at::Tensor& target, const at::Tensor& g,
                          at::ScalarType operands) {
  const at::Tensor minus_g = g.neg();
  const at::Tensor at_target = probabilities.gather(1, target).mul_(minus_g).add_(g);  // [n, 1] float32
  if (operands == probabilities.scalar_type()) return probabilities.mul_(minus_g).scatter_(1, target, at_target);
  at::Tensor gradient = at::empty(probabilities.sizes(), probabilities.options().dtype(operands));
  return at::mul_out(gradient, probabilities, minus_g).scatter_(1, target, at_target.to(operands));
}

struct TargetScoresFunction : public torch::autograd::Function<TargetScoresFunction> {
  // → {log_probs [M], is_argmax [M], entropy [M] or [0]}
  static variable_list forward(AutogradContext* ctx, const at::Tensor& hidden, const at::Tensor& weight,
                               const at::Tensor& targets, const HeadPlan& plan) {
    const log::PhaseScope phase(log::StepPhase::kLossHead);
    const at::Tensor weight_operand = weight.to(plan.operands);  // rounded once, not per chunk
    const int64_t rows = hidden.size(0);
    const at::TensorOptions options = hidden.options().dtype(at::kFloat);
    const at::Tensor log_probs = at::empty({rows}, options);
    const at::Tensor log_normalizers = plan.keep_log_softmax ? at::Tensor() : at::empty({rows}, options);
    variable_list saved{hidden, weight, targets, log_normalizers};  // then the kept [n, V] chunks, if any
    const at::Tensor is_argmax = at::empty({rows}, options.dtype(at::kBool));
    const at::Tensor entropy = at::empty({plan.with_entropy ? rows : 0}, options);
    for (int64_t start = 0; start < rows; start += plan.chunk_rows) {
      const int64_t n = std::min(plan.chunk_rows, rows - start);
      const auto slice = [&](const at::Tensor& t) { return t.defined() ? t.narrow(0, start, n) : at::Tensor(); };
      const ChunkResults out{slice(log_probs), slice(log_normalizers), slice(is_argmax),
                             plan.with_entropy ? slice(entropy) : at::Tensor()};
      const at::Tensor target = targets.narrow(0, start, n).unsqueeze(1);                                  // [n, 1]
      const at::Tensor logits = model::mm(hidden.narrow(0, start, n), weight_operand.t(), plan.operands);  // [n, V]
      out.is_argmax.copy_(logits.argmax(1) == target.squeeze(1));
      if (plan.cpu_route) {
        score_by_normalizer(logits, target, out);
      } else {
        at::Tensor log_softmax = score_by_log_softmax(logits, target, out);
        if (plan.keep_log_softmax) saved.push_back(std::move(log_softmax));
      }
    }
    ctx->save_for_backward(saved);
    ctx->saved_data["chunk_rows"] = plan.chunk_rows;
    ctx->saved_data["operands"] = static_cast<int64_t>(plan.operands);
    ctx->saved_data["keep_log_softmax"] = plan.keep_log_softmax;
    ctx->mark_non_differentiable({is_argmax, entropy});
    return {log_probs, is_argmax, entropy};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const log::PhaseScope phase(log::StepPhase::kLossHead);
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& hidden = saved[0];
    const at::Tensor& weight = saved[1];
    const at::Tensor& targets = saved[2];
    const at::Tensor& log_normalizers = saved[3];  // [M], or undefined with the chunks' log-softmax kept
    const int64_t chunk_rows = ctx->saved_data["chunk_rows"].toInt();
    const auto operands = static_cast<at::ScalarType>(ctx->saved_data["operands"].toInt());
    const bool kept = ctx->saved_data["keep_log_softmax"].toBool();
    const at::Tensor weight_operand = weight.to(operands);
    const at::Tensor& grad_log_probs = grad_outputs[0];  // [M]
    const bool want_hidden = ctx->needs_input_grad(0), want_weight = ctx->needs_input_grad(1);

    at::Tensor grad_hidden = want_hidden ? at::empty_like(hidden) : at::Tensor();
    at::Tensor grad_weight;  // the first chunk's product, the others' added to it
    const int64_t rows = hidden.size(0);
    for (int64_t start = 0, chunk = 0; start < rows; start += chunk_rows, ++chunk) {
      const int64_t n = std::min(chunk_rows, rows - start);
      const at::Tensor h = hidden.narrow(0, start, n).to(operands);  // rounded once for both products
      // softmax(z) from the log-softmax the forward kept, or from the chunk's
      // logits recomputed and its saved logsumexp, in place: one [n, V] block.
      const at::Tensor probabilities = kept ? saved[4 + chunk].exp()
                                            : model::mm(h, weight_operand.t(), operands)
                                                  .sub_(log_normalizers.narrow(0, start, n).unsqueeze(1))
                                                  .exp_();
      const at::Tensor grad_operand = logit_gradient(probabilities, targets.narrow(0, start, n).unsqueeze(1),
                                                     grad_log_probs.narrow(0, start, n).unsqueeze(1), operands);
      if (want_hidden) grad_hidden.narrow(0, start, n).copy_(model::mm(grad_operand, weight_operand, operands));
      if (want_weight) {
        const at::Tensor part = model::mm(grad_operand.t(), h, operands);
        grad_weight = grad_weight.defined() ? grad_weight.add_(part) : part;
      }
    }
    if (want_weight && !grad_weight.defined()) grad_weight = at::zeros_like(weight);  // no rows
    return {grad_hidden, grad_weight, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

TargetScores score_target_rows(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& targets,
                               bool with_entropy, int64_t chunk_rows, at::ScalarType operands, LogSoftmaxReuse reuse) {
  TORCH_CHECK(hidden.dim() == 2 && weight.dim() == 2 && hidden.size(1) == weight.size(1),
              "score_target_rows: hidden [M, H] and weight [V, H] expected, got ", hidden.sizes(), " and ",
              weight.sizes());
  TORCH_CHECK(targets.dim() == 1 && targets.size(0) == hidden.size(0) && targets.scalar_type() == at::kLong,
              "score_target_rows: targets must be [M] int64 with M = ", hidden.size(0), ", got ", targets.sizes(), " ",
              targets.scalar_type());
  const int64_t rows = hidden.size(0), vocab = weight.size(0);
  HeadPlan plan;
  plan.with_entropy = with_entropy;
  plan.operands = operands;
  plan.cpu_route = takes_cpu_kernels(hidden);
  plan.chunk_rows = chunk_rows > 0 ? chunk_rows : loss_head_chunk_rows(rows, vocab, plan.cpu_route);
  // Kept only for a backward that will come: a forward without gradients
  // (a frozen reference's scores) holds one chunk at a time.
  const bool differentiated = at::GradMode::is_enabled() && (hidden.requires_grad() || weight.requires_grad());
  plan.keep_log_softmax =
      differentiated && reuse == LogSoftmaxReuse::kIfItFits && loss_head_keeps_log_softmax(rows, vocab, plan.cpu_route);
  const variable_list out = TargetScoresFunction::apply(hidden.contiguous(), weight, targets.contiguous(), plan);
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
  const TargetScores scores =
      score_target_rows(all_rows.index_select(0, rows), weight, target_ids.reshape({-1}).index_select(0, rows),
                        with_entropy, 0, operands);
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
