// Aggregation modes against hand-computed values.
#include "catch.h"

#include "ptrain/sdk/errors.h"
#include "ptrain/sdk/util/aggregation.h"

#include <ATen/ATen.h>

using namespace ptrain;

namespace {

// Two sequences plus one with no trainable token:
//   seq 0: losses 1, 2, 3 (all trained)          Σ = 6, 3 tokens
//   seq 1: losses 4, [5 masked], 6               Σ = 10, 2 tokens
//   seq 2: everything masked (loss 100 ignored)
struct Case {
  at::Tensor loss = at::tensor({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 100.0f, 100.0f, 100.0f}).view({3, 3});
  at::Tensor mask = at::tensor(std::vector<int64_t>{1, 1, 1, 1, 0, 1, 0, 0, 0}).to(at::kBool).view({3, 3});
};

double sum_for(sdk::LossAggregation mode, double norm_constant = 1.0) {
  Case c;
  return sdk::aggregate_loss_sum(c.loss, c.mask, {mode, norm_constant}).item<double>();
}

int64_t units_for(sdk::LossAggregation mode) {
  Case c;
  return sdk::count_loss_units(c.mask, {mode, 1.0});
}

}  // namespace

TEST_CASE("aggregation sums and units match the table of the update step (docs/architecture.md)") {
  using M = sdk::LossAggregation;
  CHECK(sum_for(M::kTokenMean) == Approx(16.0));
  CHECK(units_for(M::kTokenMean) == 5);
  CHECK(sum_for(M::kSeqMeanTokenMean) == Approx(6.0 / 3 + 10.0 / 2));
  CHECK(units_for(M::kSeqMeanTokenMean) == 2);
  CHECK(sum_for(M::kSeqMeanTokenSum) == Approx(16.0));
  CHECK(units_for(M::kSeqMeanTokenSum) == 2);
  CHECK(sum_for(M::kSeqMeanTokenSumNorm, 4.0) == Approx(16.0 / 4.0));
  CHECK(units_for(M::kSeqMeanTokenSumNorm) == 2);
  CHECK(sum_for(M::kSum) == Approx(16.0));
  CHECK(sdk::term_divisor({M::kSum, 1.0}) == sdk::TermDivisor::kOne);
  CHECK(sdk::term_divisor({M::kTokenMean, 1.0}) == sdk::TermDivisor::kGlobalUnits);
  CHECK(sdk::term_divisor({M::kSeqMeanTokenSumNorm, 4.0}) == sdk::TermDivisor::kGlobalUnits);
}

TEST_CASE("a NaN loss at a masked position does not reach the sum") {
  at::Tensor loss = at::tensor({1.0f, std::nanf("")}).view({1, 2});
  at::Tensor mask = at::tensor(std::vector<int64_t>{1, 0}).to(at::kBool).view({1, 2});
  CHECK(sdk::aggregate_loss_sum(loss, mask, {}).item<double>() == 1.0);
}

TEST_CASE("aggregation names parse and unknown names are refused with the allowed list") {
  for (const auto& name : sdk::loss_aggregation_names()) {
    CHECK(sdk::loss_aggregation_name(sdk::parse_loss_aggregation(name)) == name);
  }
  try {
    sdk::parse_loss_aggregation("token_means");
    FAIL("expected a ConfigError");
  } catch (const sdk::ConfigError& error) {
    CHECK(std::string(error.what()).find("token_means") != std::string::npos);
    CHECK(std::string(error.what()).find("seq_mean_token_sum_norm") != std::string::npos);
  }
}
