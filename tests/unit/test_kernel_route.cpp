// The accelerator route of the model's kernels (core/model/kernel_route.h),
// run on CPU tensors: the ops CUDA takes (ATen products, composite norms and
// rotary embeddings, the loss head over every row in large chunks) against
// an independent computation — the full log-softmax over the logits, each
// document of a packed row run alone — in float32 and under bf16-mixed; and
// the pieces of that route: the loss-head chunk policy and the document
// starts that packed rows hand the variable-length flash kernel.
#include "catch.h"

#include "core/model/attention_varlen.h"
#include "core/model/causal_lm.h"
#include "core/model/kernel_route.h"
#include "core/model/loss_head_chunks.h"
#include "core/model/target_scores.h"
#include "kernel_test_support.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cstdio>
#include <string>
#include <vector>

using ptrain::model::CausalLm;
using ptrain::model::CpuKernelRoute;
using ptrain::model::ModelConfig;
using ptrain::test::KernelRouteScope;

namespace {

ModelConfig tiny_config() {
  ModelConfig c;
  c.model_type = "qwen2";
  c.vocab_size = 29;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;  // grouped-query attention
  c.max_position_embeddings = 64;
  c.rope_theta = 10000.0;
  c.rms_norm_eps = 1e-5;
  c.tie_word_embeddings = true;
  c.qkv_bias = true;
  return c;
}

// Weights ~ N(0, scale²) (norms 1 + N(0, 0.2²)): large enough that every
// term moves the logits; bf16-mixed cases take smaller ones, whose logits a
// bf16 rounding moves less.
std::unique_ptr<CausalLm> tiny_model(double scale = 0.3) {
  auto model = CausalLm::init_random(tiny_config(), 3);
  at::NoGradGuard no_grad;
  at::manual_seed(4);
  for (auto& [name, p] : model->named_parameters()) {
    p.copy_(name.find("norm.weight") != std::string::npos ? 1.0 + 0.2 * at::randn(p.sizes())
                                                          : scale * at::randn(p.sizes()));
  }
  return model;
}

struct Scored {
  at::Tensor log_probs;  // [B, T]
  at::Tensor entropy;    // [B, T]
  at::Tensor is_argmax;  // [B, T]
  std::vector<at::Tensor> grads;
};

// Scores `batch` and backpropagates Σ weights · log p; the gradients are taken and cleared.
Scored score(CausalLm& model, const ptrain::sdk::TokenBatch& batch, const at::Tensor& weights) {
  const ptrain::sdk::TargetLogProbs out = model.target_log_probs_and_entropy(batch);
  (out.log_probs * weights).sum().backward();
  Scored scored{out.log_probs.detach(), out.entropy, out.is_argmax, {}};
  for (auto& [name, p] : model.named_parameters()) {
    scored.grads.push_back(p.grad().clone());
    p.mutable_grad() = at::Tensor();
  }
  return scored;
}

double relative_error(const std::vector<at::Tensor>& actual, const std::vector<at::Tensor>& expected) {
  double difference = 0.0, norm = 0.0;
  for (size_t i = 0; i < expected.size(); ++i) {
    difference += (actual[i].to(at::kDouble) - expected[i].to(at::kDouble)).pow(2).sum().item<double>();
    norm += expected[i].to(at::kDouble).pow(2).sum().item<double>();
  }
  return std::sqrt(difference / norm);
}

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

}  // namespace

TEST_CASE("the accelerator route scores targets as the full log-softmax does, values and gradients", "[model][route]") {
  auto model = tiny_model();
  at::manual_seed(9);
  const int64_t b = 3, t = 7, v = 29;
  const at::Tensor input_ids = at::randint(0, v, {b, t}, at::kLong);
  const at::Tensor target_ids = at::randint(0, v, {b, t}, at::kLong);
  at::Tensor loss_mask = at::rand({b, t}) < 0.6;
  loss_mask[1].fill_(false);  // a row with no trained position
  loss_mask[0][0] = true;
  const at::Tensor weights = at::randn({b, t});

  // The independent path: every logit, log-softmax, gather.
  const at::Tensor logits = model->logits(input_ids);
  const at::Tensor log_softmax = at::log_softmax(logits, -1);
  const at::Tensor full = log_softmax.gather(2, target_ids.unsqueeze(2)).squeeze(2);
  const at::Tensor expected_log_probs = at::where(loss_mask, full, at::zeros_like(full));
  const at::Tensor expected_entropy =
      at::where(loss_mask, -(log_softmax.exp() * log_softmax).sum(-1), at::zeros_like(full)).detach();
  const at::Tensor expected_argmax = (logits.argmax(-1) == target_ids).logical_and(loss_mask);
  (expected_log_probs * weights).sum().backward();
  std::vector<at::Tensor> expected_grads;
  for (auto& [name, p] : model->named_parameters()) {
    expected_grads.push_back(p.grad().clone());
    p.mutable_grad() = at::Tensor();
  }

  // Targets outside the mask are ignored on either route, even out of range.
  at::Tensor targets_with_junk = target_ids.clone();
  targets_with_junk.masked_fill_(loss_mask.logical_not(), 999);
  const ptrain::sdk::TokenBatch batch(input_ids, targets_with_junk, loss_mask);
  for (const auto route : {CpuKernelRoute::kCpu, CpuKernelRoute::kAccelerator}) {
    const KernelRouteScope scope(route);
    INFO("route " << (route == CpuKernelRoute::kCpu ? "cpu" : "accelerator"));
    const Scored scored = score(*model, batch, weights);
    const double value_error = max_abs_diff(scored.log_probs, expected_log_probs);
    const double grad_error = relative_error(scored.grads, expected_grads);
    CHECK(value_error < 1e-5);
    CHECK(max_abs_diff(scored.entropy, expected_entropy) < 1e-5);
    CHECK(at::equal(scored.is_argmax, expected_argmax));
    CHECK(grad_error < 1e-5);
    std::printf("[test_kernel_route] %s route, fp32: max log-prob error %.3g, relative gradient error %.3g\n",
                route == CpuKernelRoute::kCpu ? "cpu" : "accelerator", value_error, grad_error);
  }
}

TEST_CASE("the accelerator route runs packed rows as their documents alone, fp32 and bf16-mixed", "[model][route]") {
  auto model = tiny_model(0.1);
  at::manual_seed(12);
  // Two packed rows of 8: documents of 3 + 5 and 6 + padding 2.
  const std::vector<std::vector<int64_t>> lengths{{3, 5}, {6}};
  const int64_t t = 8, v = 29;
  const at::Tensor input_ids = at::randint(0, v, {2, t}, at::kLong);
  const at::Tensor target_ids = at::randint(0, v, {2, t}, at::kLong);
  at::Tensor position_ids = at::zeros({2, t}, at::kLong);
  at::Tensor document_ids = at::full({2, t}, -1, at::kLong);
  at::Tensor loss_mask = at::zeros({2, t}, at::kBool);
  for (int64_t row = 0; row < 2; ++row) {
    int64_t start = 0;
    for (size_t d = 0; d < lengths[row].size(); ++d) {
      const int64_t n = lengths[row][d];
      position_ids[row].narrow(0, start, n).copy_(at::arange(n, at::kLong));
      document_ids[row].narrow(0, start, n).fill_(static_cast<int64_t>(d));
      loss_mask[row].narrow(0, start + 1, n - 1).fill_(true);  // the first token of each is prompt
      start += n;
    }
  }
  ptrain::sdk::TokenBatch packed(input_ids, target_ids, loss_mask);
  packed.position_ids = position_ids;
  packed.document_ids = document_ids;
  const at::Tensor weights = at::randn({2, t});

  // Each document alone, as its own unpacked row: the reference (float32, CPU route).
  at::Tensor expected = at::zeros({2, t});
  for (auto& [name, p] : model->named_parameters()) p.mutable_grad() = at::Tensor();
  for (int64_t row = 0; row < 2; ++row) {
    int64_t start = 0;
    for (const int64_t n : lengths[row]) {
      const ptrain::sdk::TokenBatch alone(input_ids[row].narrow(0, start, n).unsqueeze(0),
                                          target_ids[row].narrow(0, start, n).unsqueeze(0),
                                          loss_mask[row].narrow(0, start, n).unsqueeze(0));
      const at::Tensor log_probs = model->target_log_probs(alone).log_probs[0];
      (log_probs * weights[row].narrow(0, start, n)).sum().backward();
      expected[row].narrow(0, start, n).copy_(log_probs.detach());
      start += n;
    }
  }
  std::vector<at::Tensor> expected_grads;
  for (auto& [name, p] : model->named_parameters()) {
    expected_grads.push_back(p.grad().clone());
    p.mutable_grad() = at::Tensor();
  }

  for (const auto dtype : {at::kFloat, at::kBFloat16}) {
    model->set_compute_dtype(dtype);
    const KernelRouteScope scope(CpuKernelRoute::kAccelerator);
    const Scored scored = score(*model, packed, weights);
    const double value_error = max_abs_diff(scored.log_probs, expected);
    const double grad_error = relative_error(scored.grads, expected_grads);
    INFO("compute dtype " << dtype << ": max log-prob error " << value_error << ", relative gradient error "
                          << grad_error);
    // bf16-mixed: the error of bf16 operands (docs/devices.md), here against fp32.
    CHECK(value_error < (dtype == at::kFloat ? 1e-5 : 5e-2));
    CHECK(grad_error < (dtype == at::kFloat ? 1e-5 : 2e-2));
    std::printf("[test_kernel_route] accelerator route, packed, %s: max log-prob error %.3g, gradient error %.3g\n",
                dtype == at::kFloat ? "fp32" : "bf16-mixed", value_error, grad_error);
  }
  model->set_compute_dtype(at::kFloat);
}

TEST_CASE("the accelerator route's bf16-mixed step agrees across microbatch splits", "[model][route]") {
  // Row-wise kernels: a row's log-probs and its share of the gradient do not
  // depend on the rows beside it beyond rounding. Here (ATen on the CPU)
  // products round their results to bfloat16, so a split may move a row by
  // bf16 rounding: no more than twice what bf16-mixed moves it from float32.
  auto model = tiny_model(0.1);
  const KernelRouteScope scope(CpuKernelRoute::kAccelerator);
  at::manual_seed(21);
  const int64_t b = 4, t = 9, v = 29;
  const at::Tensor input_ids = at::randint(0, v, {b, t}, at::kLong);
  const at::Tensor target_ids = at::randint(0, v, {b, t}, at::kLong);
  const at::Tensor loss_mask = at::rand({b, t}) < 0.7;
  const at::Tensor weights = at::randn({b, t});
  const Scored fp32 = score(*model, {input_ids, target_ids, loss_mask}, weights);
  model->set_compute_dtype(at::kBFloat16);
  const Scored whole = score(*model, {input_ids, target_ids, loss_mask}, weights);
  std::vector<at::Tensor> split_grads;
  at::Tensor split_log_probs = at::zeros({b, t});
  for (int64_t row = 0; row < b; ++row) {
    const Scored one =
        score(*model, {input_ids.narrow(0, row, 1), target_ids.narrow(0, row, 1), loss_mask.narrow(0, row, 1)},
              weights.narrow(0, row, 1));
    split_log_probs[row].copy_(one.log_probs[0]);
    for (size_t i = 0; i < one.grads.size(); ++i) {
      if (row == 0) {
        split_grads.push_back(one.grads[i]);
      } else {
        split_grads[i] += one.grads[i];
      }
    }
  }
  const double value_error = max_abs_diff(split_log_probs, whole.log_probs);
  const double grad_error = relative_error(split_grads, whole.grads);
  const double bf16_value_error = max_abs_diff(whole.log_probs, fp32.log_probs);
  const double bf16_grad_error = relative_error(whole.grads, fp32.grads);
  std::printf(
      "[test_kernel_route] accelerator route, bf16-mixed, 1 vs 4 rows: log-prob error %.3g, gradient %.3g "
      "(bf16-mixed vs fp32: %.3g, %.3g)\n",
      value_error, grad_error, bf16_value_error, bf16_grad_error);
  CHECK(value_error <= 2 * bf16_value_error);
  CHECK(grad_error <= 2 * bf16_grad_error);
  CHECK(bf16_grad_error < 3e-2);
}

TEST_CASE("loss-head chunks: the CPU keeps ~4M logits, an accelerator takes large even chunks", "[model][route]") {
  using ptrain::model::loss_head_chunk_rows;
  // CPU: 2^22 logits a chunk, whatever the rows.
  CHECK(loss_head_chunk_rows(8192, 151936, true) == 27);
  CHECK(loss_head_chunk_rows(10, 32000, true) == 131);
  CHECK(loss_head_chunk_rows(5, 1 << 23, true) == 1);
  // Accelerator: at most 2^28 logits, split evenly; never a chunk below 256
  // rows unless there are fewer rows.
  CHECK(loss_head_chunk_rows(8192, 151936, false) == 1639);  // 5 chunks of 1,766 rows at most
  CHECK(loss_head_chunk_rows(1000, 151936, false) == 1000);  // one chunk
  CHECK(loss_head_chunk_rows(100, 151936, false) == 100);
  CHECK(loss_head_chunk_rows(4096, 1 << 22, false) == 256);       // a vocabulary past 2^20: 256 rows anyway
  CHECK(loss_head_chunk_rows(1 << 20, 259, false) == (1 << 19));  // two chunks of ~2^28 logits
  for (const int64_t rows : {257, 2000, 8192, 16385}) {
    const int64_t chunk = loss_head_chunk_rows(rows, 151936, false);
    const int64_t last = rows - (rows - 1) / chunk * chunk;
    INFO(rows << " rows: chunks of " << chunk << ", the last of " << last);
    CHECK(chunk * 151936 <= (int64_t{1} << 28));
    CHECK(last >= std::min<int64_t>(rows, 256));
  }
}

TEST_CASE("the accelerator route keeps the loss head's log-softmax when it fits, 2^31 logits", "[model][route]") {
  using ptrain::model::loss_head_keeps_log_softmax;
  CHECK(loss_head_keeps_log_softmax(8192, 151936, false));         // Qwen2.5-0.5B, 4 rows of 2048: 4.6 GiB
  CHECK_FALSE(loss_head_keeps_log_softmax(16384, 151936, false));  // 9.3 GiB: recomputed
  CHECK(loss_head_keeps_log_softmax(int64_t{1} << 16, int64_t{1} << 15, false));
  CHECK_FALSE(loss_head_keeps_log_softmax((int64_t{1} << 16) + 1, int64_t{1} << 15, false));
  CHECK_FALSE(loss_head_keeps_log_softmax(1, 29, true));  // the CPU route always recomputes
}

TEST_CASE("the loss head's kept log-softmax gives the recomputed values and gradients, fp32 and bf16",
          "[model][route]") {
  using ptrain::model::LogSoftmaxReuse;
  const KernelRouteScope scope(CpuKernelRoute::kAccelerator);
  at::manual_seed(37);
  const at::Tensor hidden = at::randn({300, 16}).requires_grad_(true);
  const at::Tensor weight = (0.5 * at::randn({29, 16})).requires_grad_(true);
  const at::Tensor targets = at::randint(0, 29, {300}, at::kLong);
  const at::Tensor weights = at::randn({300});
  // The independent path: every logit, log-softmax, gather.
  const at::Tensor full = at::log_softmax(at::mm(hidden, weight.t()), 1);
  const at::Tensor expected_log_probs = full.gather(1, targets.unsqueeze(1)).squeeze(1);
  const at::Tensor expected_entropy = -(full.exp() * full).sum(1).detach();
  (expected_log_probs * weights).sum().backward();
  const at::Tensor expected_grads = at::cat({hidden.grad().flatten(), weight.grad().flatten()});
  hidden.mutable_grad() = at::Tensor();
  weight.mutable_grad() = at::Tensor();

  for (const auto operands : {at::kFloat, at::kBFloat16}) {
    std::vector<at::Tensor> results;
    for (const auto reuse : {LogSoftmaxReuse::kIfItFits, LogSoftmaxReuse::kNever}) {
      const auto scores = ptrain::model::score_target_rows(hidden, weight, targets, true, 7, operands, reuse);
      (scores.log_probs * weights).sum().backward();
      results.push_back(
          at::cat({scores.log_probs.detach(), scores.entropy, hidden.grad().flatten(), weight.grad().flatten()}));
      hidden.mutable_grad() = at::Tensor();
      weight.mutable_grad() = at::Tensor();
    }
    INFO((operands == at::kFloat ? "fp32" : "bf16") << " operands");
    const at::Tensor expected = at::cat({expected_log_probs.detach(), expected_entropy, expected_grads});
    const double scale = expected.abs().max().item<double>();
    // The two ways agree to float32 rounding; both agree with the full
    // log-softmax to float32 rounding, or to bf16 operands' rounding.
    CHECK(max_abs_diff(results[0], results[1]) < 1e-5 * scale);
    const double tolerance = operands == at::kFloat ? 1e-5 : 3e-2;
    CHECK(max_abs_diff(results[0], expected) < tolerance * scale);
    CHECK(max_abs_diff(results[1], expected) < tolerance * scale);
  }
}

TEST_CASE("the loss head's chunk size does not change its values or gradients", "[model][route]") {
  at::manual_seed(31);
  const at::Tensor hidden = at::randn({300, 16}).requires_grad_(true);
  const at::Tensor weight = at::randn({29, 16}).requires_grad_(true);
  const at::Tensor targets = at::randint(0, 29, {300}, at::kLong);
  std::vector<at::Tensor> results;
  for (const int64_t chunk_rows : {300, 7, 256}) {
    const auto scores = ptrain::model::score_target_rows(hidden, weight, targets, true, chunk_rows);
    scores.log_probs.sum().backward();
    results.push_back(
        at::cat({scores.log_probs.detach(), scores.entropy, hidden.grad().flatten(), weight.grad().flatten()}));
    hidden.mutable_grad() = at::Tensor();
    weight.mutable_grad() = at::Tensor();
  }
  const double scale = results[0].abs().max().item<double>();
  CHECK(max_abs_diff(results[1], results[0]) < 1e-6 * scale);
  CHECK(max_abs_diff(results[2], results[0]) < 1e-6 * scale);
}

TEST_CASE("packed rows: each document's start, then each row's padding, for the varlen kernel", "[model][route]") {
  const at::Tensor document_ids = at::tensor({0, 0, 0, 1, 1, -1, 0, 0, 0, 0, 1, 2}, at::kLong).view({2, 6});
  const at::Tensor starts = ptrain::model::packed_sequence_starts(document_ids);
  CHECK(starts.scalar_type() == at::kInt);
  CHECK(at::equal(starts, at::tensor({0, 3, 5, 6, 10, 11, 12}, at::kInt)));
  // A row that is one document, and rows of one token each.
  CHECK(
      at::equal(ptrain::model::packed_sequence_starts(at::zeros({2, 4}, at::kLong)), at::tensor({0, 4, 8}, at::kInt)));
  CHECK(at::equal(ptrain::model::packed_sequence_starts(at::zeros({3, 1}, at::kLong)),
                  at::tensor({0, 1, 2, 3}, at::kInt)));
  // Only CUDA, in a low-precision dtype with a head size flash takes, uses it.
  CHECK_FALSE(ptrain::model::packed_flash_attention_applies(at::kCPU, at::kBFloat16, 64));
}
