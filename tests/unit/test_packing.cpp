// The throughput paths must not change a number: packed rows equal their
// documents run one by one, activation checkpointing gives the same
// gradients, chunked target log-probs equal the full log-softmax, and the
// packing planner keeps every example once within its budgets. References are
// the plain paths (one document per forward, full-vocabulary log_softmax).
#include "catch.h"

#include "support/test_util.h"

#include "core/model/causal_lm.h"
#include "core/model/model_transforms.h"
#include "core/model/target_scores.h"
#include "ptrain/sdk/batch.h"
#include "ptrain/sdk/util/aggregation.h"
#include "ptrain/sdk/util/microbatching.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <random>
#include <vector>

using namespace ptrain;

namespace {

using testing::parameters_of;

std::unique_ptr<model::CausalLm> tiny_model(uint64_t seed) {
  return model::CausalLm::init_random(testing::tiny_model_config(), seed);
}

std::vector<at::Tensor> take_gradients(const std::vector<at::Tensor>& parameters) {
  std::vector<at::Tensor> grads;
  for (const at::Tensor& parameter : parameters) {
    grads.push_back(parameter.grad().defined() ? parameter.grad().detach().clone() : at::zeros_like(parameter));
    parameter.mutable_grad() = at::Tensor();
  }
  return grads;
}

// Random token ids of the given lengths, with every target trained on.
std::vector<std::vector<int64_t>> random_documents(const std::vector<int64_t>& lengths, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> id(0, 255);
  std::vector<std::vector<int64_t>> documents;
  for (const int64_t length : lengths) {
    documents.emplace_back();
    for (int64_t i = 0; i < length + 1; ++i) documents.back().push_back(id(rng));  // inputs + one more target
  }
  return documents;
}

// One document per row: inputs tokens[:-1], targets tokens[1:].
sdk::TokenBatch single_document_batch(const std::vector<int64_t>& tokens) {
  const auto n = static_cast<int64_t>(tokens.size()) - 1;
  sdk::TokenBatch batch;
  batch.input_ids = at::tensor(std::vector<int64_t>(tokens.begin(), tokens.end() - 1), at::kLong).view({1, n});
  batch.target_ids = at::tensor(std::vector<int64_t>(tokens.begin() + 1, tokens.end()), at::kLong).view({1, n});
  batch.loss_mask = at::ones({1, n}, at::kBool);
  return batch;
}

// Rows of documents packed back to back and right-padded with id 0.
sdk::TokenBatch packed_batch(const std::vector<std::vector<std::vector<int64_t>>>& rows) {
  std::vector<std::vector<int64_t>> inputs, targets, lengths;
  for (const auto& row : rows) {
    inputs.emplace_back();
    targets.emplace_back();
    lengths.emplace_back();
    for (const auto& tokens : row) {
      inputs.back().insert(inputs.back().end(), tokens.begin(), tokens.end() - 1);
      targets.back().insert(targets.back().end(), tokens.begin() + 1, tokens.end());
      lengths.back().push_back(static_cast<int64_t>(tokens.size()) - 1);
    }
  }
  sdk::TokenBatch batch;
  batch.input_ids = sdk::pad_sequences(inputs, 0);
  batch.target_ids = sdk::pad_sequences(targets, 0);
  std::tie(batch.document_ids, batch.position_ids) = sdk::packed_document_layout(lengths);
  batch.loss_mask = batch.document_ids.ge(0);
  return batch;
}

double max_abs_difference(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>());
  return worst;
}

// Documents of `lengths` (inputs), the first `first_row` of them packed into
// row 0 and the rest into row 1: each document's log-probs and the gradient of
// their sum equal those of each document in a forward of its own.
void check_packed_rows_match_documents_alone(model::CausalLm& model, const std::vector<int64_t>& lengths,
                                             size_t first_row) {
  const std::vector<at::Tensor> parameters = parameters_of(model);
  const auto documents = random_documents(lengths, 17);

  // Reference: each document in a forward of its own.
  std::vector<at::Tensor> alone;
  at::Tensor reference_sum = at::zeros({}, at::kFloat);
  for (const auto& tokens : documents) {
    const at::Tensor log_probs = model.target_log_probs(single_document_batch(tokens)).log_probs.view({-1});
    alone.push_back(log_probs.detach());
    reference_sum = reference_sum + log_probs.sum();
  }
  reference_sum.backward();
  const std::vector<at::Tensor> reference_grads = take_gradients(parameters);

  const auto split_at = static_cast<std::ptrdiff_t>(first_row);
  const auto split = documents.begin() + split_at;
  const sdk::TokenBatch packed = packed_batch({{documents.begin(), split}, {split, documents.end()}});
  const int64_t first_row_positions = std::accumulate(lengths.begin(), lengths.begin() + split_at, int64_t{0});
  const int64_t second_row_positions = std::accumulate(lengths.begin() + split_at, lengths.end(), int64_t{0});
  REQUIRE(packed.input_ids.sizes() == at::IntArrayRef({2, std::max(first_row_positions, second_row_positions)}));
  const at::Tensor log_probs = model.target_log_probs(packed).log_probs;
  int64_t column = 0, row = 0;
  for (size_t d = 0; d < documents.size(); ++d) {
    if (d == first_row) row = 1, column = 0;
    const int64_t n = alone[d].size(0);
    const double difference = (log_probs[row].narrow(0, column, n).detach() - alone[d]).abs().max().item<double>();
    INFO("document " << d);
    CHECK(difference < 1e-5);
    column += n;
  }
  log_probs.sum().backward();
  CHECK(max_abs_difference(take_gradients(parameters), reference_grads) < 1e-5);
}

}  // namespace

TEST_CASE("a packed row gives each document the log-probs and gradients it has alone", "[packing]") {
  SECTION("short rows (18 and 15 positions, the shorter padded)") {
    check_packed_rows_match_documents_alone(*tiny_model(5), {5, 9, 4, 12, 3}, 3);
  }
  SECTION("rows of 210 and 145 positions: the unfused attention's query blocks cross document edges") {
    model::ModelConfig config = testing::tiny_model_config();
    config.max_position_embeddings = 256;
    check_packed_rows_match_documents_alone(*model::CausalLm::init_random(config, 5), {70, 50, 90, 100, 45}, 3);
  }
}

TEST_CASE("activation checkpointing gives the same gradients as keeping activations", "[packing]") {
  auto model = tiny_model(9);
  const std::vector<at::Tensor> parameters = parameters_of(*model);
  const auto documents = random_documents({7, 11, 6}, 3);
  // Both layouts: plain causal rows and a packed row.
  for (const sdk::TokenBatch& batch :
       {packed_batch({{documents[0]}, {documents[1]}, {documents[2]}}), packed_batch({{documents[0], documents[1]}})}) {
    ptrain::model::apply_activation_checkpointing(*model, false);
    model->target_log_probs(batch).log_probs.sum().backward();
    const std::vector<at::Tensor> kept = take_gradients(parameters);
    ptrain::model::apply_activation_checkpointing(*model, true);
    const at::Tensor checkpointed_sum = model->target_log_probs(batch).log_probs.sum();
    checkpointed_sum.backward();
    const std::vector<at::Tensor> recomputed = take_gradients(parameters);
    ptrain::model::apply_activation_checkpointing(*model, false);
    CHECK(max_abs_difference(kept, recomputed) < 1e-6);
    // Every parameter got a gradient through the recomputation.
    for (const at::Tensor& grad : recomputed) CHECK(grad.abs().sum().item<double>() > 0.0);
  }
}

TEST_CASE("chunked target log-probs equal the full log-softmax path, values and gradients", "[packing]") {
  at::manual_seed(4);
  const int64_t rows = 23, width = 16, vocab = 50;
  const at::Tensor hidden = at::randn({rows, width}, at::kDouble).to(at::kFloat).requires_grad_(true);
  const at::Tensor weight = at::randn({vocab, width}).requires_grad_(true);
  const at::Tensor targets = at::randint(0, vocab, {rows}, at::kLong);
  const at::Tensor upstream = at::randn({rows});  // a weighted sum, so each row's gradient differs

  // Reference: full logits, full log_softmax, gather.
  const at::Tensor logits = at::mm(hidden, weight.t());
  const at::Tensor full_log_probs = at::log_softmax(logits, 1).gather(1, targets.unsqueeze(1)).squeeze(1);
  (full_log_probs * upstream).sum().backward();
  const at::Tensor reference_hidden_grad = hidden.grad().clone(), reference_weight_grad = weight.grad().clone();
  const at::Tensor reference_entropy = -(at::softmax(logits, 1) * at::log_softmax(logits, 1)).sum(1).detach();
  const at::Tensor reference_argmax = logits.argmax(1) == targets;

  for (const int64_t chunk_rows : {int64_t{1}, int64_t{4}, int64_t{23}, int64_t{0}}) {
    INFO("chunk_rows " << chunk_rows);
    hidden.mutable_grad() = at::Tensor();
    weight.mutable_grad() = at::Tensor();
    const model::TargetScores scores = model::score_target_rows(hidden, weight, targets, true, chunk_rows);
    CHECK((scores.log_probs - full_log_probs).abs().max().item<double>() < 1e-5);
    CHECK((scores.entropy - reference_entropy).abs().max().item<double>() < 1e-5);
    CHECK(at::equal(scores.is_argmax, reference_argmax));
    (scores.log_probs * upstream).sum().backward();
    CHECK((hidden.grad() - reference_hidden_grad).abs().max().item<double>() < 1e-5);
    CHECK((weight.grad() - reference_weight_grad).abs().max().item<double>() < 1e-5);
  }
}

TEST_CASE("best-fit-decreasing packing keeps every example once, within its budgets, with little padding",
          "[packing]") {
  // Long-tailed lengths: lognormal, median ~60, capped at the row length.
  std::mt19937_64 rng(11);
  std::lognormal_distribution<double> draw(std::log(60.0), 0.9);
  std::vector<int64_t> lengths;
  for (int i = 0; i < 400; ++i) lengths.push_back(std::clamp<int64_t>(std::llround(draw(rng)), 2, 512));

  sdk::MicrobatchPlan plan;
  plan.micro_tokens = 2048;
  plan.packing = true;
  plan.row_tokens = 512;
  const std::vector<sdk::PackedMicrobatch> microbatches = sdk::plan_packed_microbatches(lengths, plan);

  std::vector<int> seen(lengths.size(), 0);
  int64_t computed = 0, real = 0;
  for (const sdk::PackedMicrobatch& rows : microbatches) {
    int64_t longest = 0;
    for (const auto& row : rows) {
      int64_t used = 0;
      for (const int64_t example : row) used += lengths[example], ++seen[example];
      CHECK(used <= plan.row_tokens);
      longest = std::max(longest, used);
      real += used;
    }
    CHECK(longest * static_cast<int64_t>(rows.size()) <= plan.micro_tokens);
    computed += longest * static_cast<int64_t>(rows.size());
  }
  CHECK(std::all_of(seen.begin(), seen.end(), [](int count) { return count == 1; }));
  const double padding_share = 1.0 - static_cast<double>(real) / static_cast<double>(computed);
  INFO("padding share " << padding_share);
  CHECK(padding_share < 0.05);
  // The same lengths give the same plan.
  CHECK(sdk::plan_packed_microbatches(lengths, plan) == microbatches);

  // Without packing, grouping by length orders each microbatch's members longest first.
  sdk::MicrobatchPlan grouped;
  grouped.micro_size = 4;
  grouped.group_by_length = true;
  const auto groups = sdk::split_into_microbatches({3, 9, 1, 7, 5, 9}, grouped);
  CHECK(groups == std::vector<std::vector<int64_t>>{{1, 5, 3, 4}, {0, 2}});
}

TEST_CASE("sequence-mean aggregation counts each document of a packed row as a sequence", "[packing]") {
  // Two documents in one row (lengths 3 and 2, the second untrained) and one alone.
  sdk::TokenBatch batch;
  std::tie(batch.document_ids, batch.position_ids) = sdk::packed_document_layout({{3, 2}, {4}});
  batch.loss_mask =
      at::tensor(std::vector<uint8_t>{1, 1, 1, 0, 0, 1, 0, 1, 1, 0}, at::kByte).view({2, 5}).to(at::kBool);
  const at::Tensor token_loss = at::tensor(std::vector<float>{1, 2, 3, 9, 9, 4, 9, 6, 8, 9}).view({2, 5});
  const sdk::AggregationSpec seq_mean{sdk::LossAggregation::kSeqMeanTokenMean, 1.0};
  // Sequences with a trained token: document 0 of row 0 (mean 2) and row 1's (positions 0, 2, 3: mean 6).
  // Position 9 of row 1 is padding (document -1) and untrained.
  CHECK(sdk::count_loss_units(batch, seq_mean) == 2);
  CHECK(sdk::aggregate_loss_sum(token_loss, batch, seq_mean).item<double>() == Approx(2.0 + (4.0 + 6 + 8) / 3));
  CHECK(sdk::count_loss_units(batch, {sdk::LossAggregation::kTokenMean, 1.0}) == 6);
}
