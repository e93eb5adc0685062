// Metric reduction against values computed by hand.
#include "catch.h"

#include "core/dist/communicator.h"
#include "core/log/progress.h"
#include "core/metrics/metric_reducer.h"
#include "core/metrics/metrics_sink.h"
#include "ptrain/sdk/errors.h"
#include "ptrain/sdk/util/row_metrics.h"

#include <ATen/ATen.h>

using namespace ptrain;

TEST_CASE("every reduction gives its closed form over microbatches") {
  metrics::MetricReducer reducer({{"s", sdk::Reduction::kSum},
                                  {"m", sdk::Reduction::kMean},
                                  {"hi", sdk::Reduction::kMax},
                                  {"lo", sdk::Reduction::kMin},
                                  {"acc", sdk::Reduction::kWeightedMean},
                                  {"never", sdk::Reduction::kMean},
                                  {"never_sum", sdk::Reduction::kSum}});
  sdk::MetricList first;
  first.add("s", 1.5);
  first.add("m", 2.0);
  first.add("hi", -3.0);
  first.add("lo", 4.0);
  first.add("acc", 0.5, 10.0);  // 5 of 10 right
  sdk::MetricList second;
  second.add("s", 2.5);
  second.add("m", 4.0);
  second.add("hi", -1.0);
  second.add("lo", -2.0);
  second.add("acc", 1.0, 30.0);  // 30 of 30 right
  reducer.add(first);
  reducer.add(second);

  auto communicator = dist::make_single_process_communicator();
  const auto reduced = reducer.reduce(*communicator);
  CHECK(reduced.at("s") == Approx(4.0));
  CHECK(reduced.at("m") == Approx(3.0));
  CHECK(reduced.at("hi") == Approx(-1.0));
  CHECK(reduced.at("lo") == Approx(-2.0));
  CHECK(reduced.at("acc") == Approx(35.0 / 40.0));
  CHECK(reduced.count("never") == 0);  // a mean of nothing is absent, not NaN
  CHECK(reduced.at("never_sum") == 0.0);

  // reduce() starts the next step from scratch.
  reducer.add("m", 10.0);
  const auto next = reducer.reduce(*communicator);
  CHECK(next.at("m") == Approx(10.0));
  CHECK(next.at("s") == 0.0);
}

TEST_CASE("tensor metric values reduce like doubles and are read once at the end of the step") {
  metrics::MetricReducer reducer({{"s", sdk::Reduction::kSum},
                                  {"hi", sdk::Reduction::kMax},
                                  {"lo", sdk::Reduction::kMin},
                                  {"acc", sdk::Reduction::kWeightedMean},
                                  {"rows", sdk::Reduction::kWeightedMean},
                                  {"empty", sdk::Reduction::kWeightedMean}});
  sdk::MetricList first;
  first.add("s", at::tensor(1.5f));                                               // float32: read as double
  first.add("hi", at::tensor({-3.0}, at::kDouble));                               // any one-element shape
  first.add("lo", 4.0);                                                           // doubles and tensors mix
  first.add("acc", at::tensor(5.0) / at::tensor(10.0), at::tensor(int64_t{10}));  // 5 of 10
  sdk::add_row_mean(first, "rows", at::tensor({1.0, 2.0, 3.0}));                  // mean 2 over 3 rows
  first.add("empty", at::tensor(0.0), at::tensor(0.0));                           // no tokens: weight 0 adds nothing
  sdk::MetricList second;
  second.add("s", 2.5);
  second.add("hi", at::tensor(-1.0));
  second.add("lo", at::tensor(-2.0));
  second.add("acc", at::tensor(1.0), 30.0);  // 30 of 30
  sdk::add_row_mean(second, "rows", at::tensor({10.0}));
  reducer.add(first);
  reducer.add(second);

  auto communicator = dist::make_single_process_communicator();
  const auto reduced = reducer.reduce(*communicator);
  CHECK(reduced.at("s") == Approx(4.0));
  CHECK(reduced.at("hi") == Approx(-1.0));
  CHECK(reduced.at("lo") == Approx(-2.0));
  CHECK(reduced.at("acc") == Approx(35.0 / 40.0));
  CHECK(reduced.at("rows") == Approx((1.0 + 2.0 + 3.0 + 10.0) / 4.0));
  CHECK(reduced.count("empty") == 0);

  // Nothing of the last step is left over.
  reducer.add("s", 1.0);
  CHECK(reducer.reduce(*communicator).at("s") == Approx(1.0));
}

TEST_CASE("a tensor metric must hold one element and be declared") {
  sdk::MetricList metrics;
  CHECK_THROWS_AS(metrics.add("acc", at::ones({2})), sdk::PluginError);
  CHECK_THROWS_WITH(metrics.add("acc", at::ones({2})),
                    Catch::Contains("metric 'acc': its value must be a tensor of one element, got shape [2]"));
  CHECK_THROWS_WITH(
      metrics.add("acc", at::tensor(1.0), at::Tensor()),
      Catch::Contains("metric 'acc': its weight must be a tensor of one element, got an undefined tensor"));
  metrics::MetricReducer reducer({{"a", sdk::Reduction::kSum}});
  sdk::MetricList undeclared;
  undeclared.add("b", at::tensor(1.0));
  CHECK_THROWS_WITH(reducer.add(undeclared), Catch::Contains("metric 'b' was emitted but not declared"));
}

TEST_CASE("undeclared and duplicate metrics are refused by name") {
  CHECK_THROWS_WITH(metrics::MetricReducer({{"a", sdk::Reduction::kSum}, {"a", sdk::Reduction::kMean}}),
                    Catch::Contains("'a' is declared twice"));
  metrics::MetricReducer reducer({{"a", sdk::Reduction::kSum}});
  CHECK_THROWS_WITH(reducer.add("b", 1.0), Catch::Contains("metric 'b' was emitted but not declared"));
}

TEST_CASE("console lines and durations read well") {
  CHECK(log::format_duration(5.2) == "5s");
  CHECK(log::format_duration(125) == "2m05s");
  CHECK(log::format_duration(3725) == "1h02m");
  const std::string line =
      metrics::format_console_line(12, 300, {{"loss", 2.34112}, {"lr", 0.001}, {"grad_norm", 0.8121}}, 72);
  CHECK(line == "step 12/300 | loss 2.3411 | lr 1.00e-03 | grad_norm 0.812 | eta 1m12s");
}
