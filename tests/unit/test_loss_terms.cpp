// The update step's loss terms (DESIGN.md §2): each term divided by its own
// global units (or by 1), its share of L logged as loss/<term>, and a plugin
// whose counts or sums do not match its terms refused, naming it.
#include "catch.h"

#include "support/test_util.h"

#include "core/dist/communicator.h"
#include "core/metrics/metric_reducer.h"
#include "core/model/causal_lm.h"
#include "core/plugin/host_context.h"
#include "core/tokenizer/byte_tokenizer.h"
#include "core/train/update_step.h"
#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

namespace {

using namespace ptrain;

// S_j of microbatch k is values[k][j] · Σw, with n_j = units[k][j]: the
// gradient of every element of w is Σ_j Σ_k values[k][j] / divisor_j.
struct FakeMicrobatch final : sdk::Microbatch {
  std::vector<int64_t> units;
  std::vector<double> values;
};

class FakeModule final : public sdk::TrainModule {
 public:
  std::vector<sdk::LossTerm> terms;
  std::vector<FakeMicrobatch> batches;
  at::Tensor weight = at::ones({3}, at::kDouble).requires_grad_();
  bool extra_count = false;   // count_units gives one count too many
  bool missing_sum = false;   // microbatch_loss gives one sum too few
  bool detached_sum = false;  // the last term's sum does not require grad
  std::vector<sdk::MetricSpec> metrics;

  void setup(sdk::Context&) override {}
  std::vector<sdk::MetricSpec> metric_specs() const override { return metrics; }
  void check_example(const sdk::Example&) const override {}
  std::vector<std::unique_ptr<sdk::Microbatch>> prepare(sdk::Context&, const std::vector<const sdk::Example*>&,
                                                        const sdk::MicrobatchPlan&) override {
    std::vector<std::unique_ptr<sdk::Microbatch>> out;
    for (const FakeMicrobatch& batch : batches) out.push_back(std::make_unique<FakeMicrobatch>(batch));
    return out;
  }
  std::vector<sdk::LossTerm> loss_terms() const override { return terms; }
  std::vector<int64_t> count_units(const sdk::Microbatch& microbatch) const override {
    std::vector<int64_t> units = static_cast<const FakeMicrobatch&>(microbatch).units;
    if (extra_count) units.push_back(1);
    return units;
  }
  sdk::LossOut microbatch_loss(sdk::Context&, const sdk::Microbatch& microbatch) override {
    const auto& batch = static_cast<const FakeMicrobatch&>(microbatch);
    sdk::LossOut out;
    for (const double value : batch.values) out.loss_sums.push_back(weight.sum() * value);
    if (detached_sum) out.loss_sums.back() = out.loss_sums.back().detach();
    if (missing_sum) out.loss_sums.pop_back();
    return out;
  }
};

struct Step {
  std::unique_ptr<model::CausalLm> model = model::CausalLm::init_random(testing::tiny_model_config(), 0);
  tokenizer::ByteTokenizer tokenizer;
  sdk::ConfigValues values{"module"};
  std::unique_ptr<dist::Communicator> communicator = dist::make_single_process_communicator();
  plugin::HostContext context{*model, tokenizer, values, *communicator, sdk::RunInfo{}};

  // Runs the step; returns the reduced metrics.
  std::map<std::string, double> run(FakeModule& module, train::GradientResult* result = nullptr) {
    const std::vector<at::Tensor> parameters{module.weight};
    dist::GradientSynchronizer grad_sync(parameters, *communicator, 1 << 20);
    metrics::MetricReducer reducer(train::step_metric_specs(module));
    const train::GradientResult step = train::accumulate_gradients(
        {module, "fake", context, parameters, *communicator, grad_sync}, {}, sdk::MicrobatchPlan{1, 0}, reducer);
    if (result != nullptr) *result = step;
    return reducer.reduce(*communicator);
  }
};

FakeModule two_terms() {
  FakeModule module;
  module.terms = {{"pair", sdk::TermDivisor::kGlobalUnits}, {"total", sdk::TermDivisor::kOne}};
  FakeMicrobatch first;
  first.units = {2, 5};
  first.values = {3.0, 1.0};
  FakeMicrobatch second;
  second.units = {2, 0};
  second.values = {1.0, 0.5};
  module.batches = {first, second};
  return module;
}

}  // namespace

TEST_CASE("loss terms: each term is divided by its own global units or by 1, and logged as loss/<term>",
          "[invariance][terms]") {
  Step step;
  FakeModule module = two_terms();
  train::GradientResult result;
  const std::map<std::string, double> reduced = step.run(module, &result);
  CHECK(result.global_units == std::vector<int64_t>{4, 5});
  // pair: (3 + 1) · Σw / 4 = 3; total: (1 + 0.5) · Σw / 1 = 4.5 with Σw = 3.
  CHECK(reduced.at("loss/pair") == Approx(3.0));
  CHECK(reduced.at("loss/total") == Approx(4.5));
  CHECK(reduced.at("core/loss") == Approx(7.5));
  CHECK(at::allclose(module.weight.grad(), at::full({3}, 4.0 / 4 + 1.5, at::kDouble)));
}

TEST_CASE("loss terms: one term is the loss itself, logged once", "[invariance][terms]") {
  Step step;
  FakeModule module = two_terms();
  module.terms.pop_back();
  for (FakeMicrobatch& batch : module.batches) {
    batch.units.pop_back();
    batch.values.pop_back();
  }
  const std::map<std::string, double> reduced = step.run(module);
  CHECK(reduced.at("core/loss") == Approx(3.0));
  CHECK(reduced.count("loss/pair") == 0);
}

TEST_CASE("loss terms: a term without units anywhere adds nothing", "[invariance][terms]") {
  Step step;
  FakeModule module = two_terms();
  for (FakeMicrobatch& batch : module.batches) batch.units[0] = 0;
  const std::map<std::string, double> reduced = step.run(module);
  CHECK(reduced.at("loss/pair") == 0.0);
  CHECK(reduced.at("loss/total") == Approx(4.5));
  CHECK(at::allclose(module.weight.grad(), at::full({3}, 1.5, at::kDouble)));
}

TEST_CASE("loss terms: counts or sums that do not match the terms are refused, naming the plugin",
          "[invariance][terms]") {
  Step step;
  FakeModule counts = two_terms();
  counts.extra_count = true;
  CHECK_THROWS_AS(step.run(counts), sdk::PluginError);
  CHECK(testing::error_of([&] { step.run(counts); }) ==
        "plugin 'fake': count_units returned 3 counts for 2 loss terms");

  FakeModule sums = two_terms();
  sums.missing_sum = true;
  CHECK(testing::error_of([&] { step.run(sums); }) ==
        "plugin 'fake': microbatch_loss returned 1 loss sums for 2 loss terms");

  FakeModule negative = two_terms();
  negative.batches[1].units[1] = -1;
  CHECK(testing::error_of([&] { step.run(negative); }) ==
        "plugin 'fake': loss term 'total' has a negative unit count (-1)");
}

TEST_CASE("loss terms: units with a loss sum that does not require grad are an error naming the plugin",
          "[invariance][terms]") {
  Step step;
  FakeModule module = two_terms();
  module.detached_sum = true;
  CHECK(testing::error_of([&] { step.run(module); }) ==
        "plugin 'fake': loss term 'total' of microbatch 0 has 5 units but a loss sum that does not require grad: it "
        "would train nothing");
  // Without units in the microbatch, a constant sum is fine.
  module.batches[0].units[1] = 0;
  module.batches[1].units[1] = 0;
  CHECK_NOTHROW(step.run(module));
}

TEST_CASE("loss terms: a term name that clashes is refused", "[terms]") {
  FakeModule twice = two_terms();
  twice.terms = {{"pair", sdk::TermDivisor::kGlobalUnits}, {"pair", sdk::TermDivisor::kOne}};
  CHECK(testing::error_of([&] { train::step_metric_specs(twice); }) ==
        "loss term 'pair' is empty or declared twice");
  FakeModule empty = two_terms();
  empty.terms = {{"", sdk::TermDivisor::kGlobalUnits}};
  CHECK_THROWS_AS(train::step_metric_specs(empty), sdk::PluginError);
}

TEST_CASE("loss terms: a plugin metric under the core's names is refused", "[terms]") {
  for (const std::string name : {"grad_norm", "core/tokens", "time/forward_s", "time/mine"}) {
    FakeModule module = two_terms();
    module.metrics = {{name, sdk::Reduction::kMean}};
    CHECK(testing::error_of([&] { train::step_metric_specs(module); }) ==
          "plugin metric '" + name + "' clashes with a core metric name");
  }
  FakeModule fine = two_terms();
  fine.metrics = {{"timing/mine", sdk::Reduction::kMean}};
  CHECK_NOTHROW(train::step_metric_specs(fine));
}
