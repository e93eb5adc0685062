// Run reports: reading run directories, summaries and the HTML page, against
// hand-written expectations (built with -DPTRAIN_REPORT=ON only).
#include "catch.h"

#include "support/run_command.h"
#include "support/test_util.h"

#include "core/report/report_html.h"
#include "core/report/run_data.h"
#include "core/report/run_summary.h"
#include "ptrain/sdk/errors.h"

#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

using namespace ptrain;

namespace {

// "2.5 - 1" for {2.5, nullopt, 1.0}: Catch cannot print optionals.
std::string show(const std::vector<std::optional<double>>& series) {
  std::string text;
  for (const auto& value : series) {
    std::ostringstream item;
    item << (text.empty() ? "" : " ");
    if (value) {
      item << *value;
    } else {
      item << "-";
    }
    text += item.str();
  }
  return text;
}

}  // namespace

TEST_CASE("a run's summary gives final, lowest and highest values and throughput", "[monitoring]") {
  report::RunData run;
  run.steps = {1, 2, 3, 4};
  run.metrics["loss"] = {3.0, 1.5, std::nullopt, 2.0};
  run.metrics["tokens"] = {100.0, 100.0, 100.0, 60.0};
  run.metrics["step_s"] = {0.5, 0.5, 0.25, 0.75};
  run.metrics["skipped_steps"] = {0.0, 0.0, 1.0, 1.0};
  run.metrics["never"] = {std::nullopt, std::nullopt, std::nullopt, std::nullopt};
  const report::RunSummary summary = report::summarize(run);
  CHECK(summary.steps == 4);
  CHECK(summary.last_step == 4);
  CHECK(summary.skipped_steps == 1);
  const report::MetricSummary& loss = summary.metrics.at("loss");
  CHECK(loss.count == 3);
  CHECK(loss.final_value == 2.0);
  CHECK(loss.min_value == 1.5);
  CHECK(loss.min_step == 2);
  CHECK(loss.max_value == 3.0);
  CHECK(loss.max_step == 1);
  CHECK(summary.tokens == 360.0);
  CHECK(summary.train_s == 2.0);
  REQUIRE(summary.tokens_per_s);
  CHECK(*summary.tokens_per_s == 180.0);
  CHECK(summary.metrics.count("never") == 0);
}

TEST_CASE("run directories are read with their metrics aligned to steps", "[monitoring]") {
  const auto dir = testing::fresh_test_dir("report_read");
  testing::write_text_file(dir, "metrics.jsonl",
                           "{\"step\": 1, \"loss\": 2.5, \"rewards/format\": 0.25}\n"
                           "{\"step\": 2, \"loss\": null}\n"
                           "{\"step\": 3, \"loss\": 1.0, \"rewards/format\": 0.5, \"rewards/answer\": 1}\n"
                           "{\"step\": 4, \"lo");  // cut short by a crash
  testing::write_text_file(dir, "config.toml", "plugin = \"sft\"\n");
  const report::RunData run = report::read_run(dir);
  CHECK(run.steps == std::vector<int64_t>{1, 2, 3});
  CHECK(run.config_toml == "plugin = \"sft\"\n");
  CHECK(show(run.metrics.at("loss")) == "2.5 - 1");
  CHECK(show(run.metrics.at("rewards/format")) == "0.25 - 0.5");
  CHECK(show(run.metrics.at("rewards/answer")) == "- - 1");

  report::RunData other;
  other.metrics["lr"] = {};
  other.metrics["grad_norm"] = {};
  other.metrics["aaa"] = {};
  const auto families = report::metric_families({run, other});
  REQUIRE(families.size() == 5);
  CHECK(families[0].first == "loss");
  CHECK(families[1].first == "lr");
  CHECK(families[2].first == "grad_norm");
  CHECK(families[3].first == "aaa");
  CHECK(families[4].first == "rewards");
  CHECK(families[4].second == std::vector<std::string>{"rewards/answer", "rewards/format"});
}

TEST_CASE("eval metrics join their training family, and constant metrics leave the charts", "[monitoring][eval]") {
  report::RunData first;
  first.steps = {1, 2, 3};
  first.metrics["loss"] = {3.0, 2.0, 1.0};
  first.metrics["eval/loss"] = {std::nullopt, 2.5, 2.25};
  first.metrics["eval/rewards/accuracy"] = {std::nullopt, std::nullopt, 0.5};
  first.metrics["comm_s"] = {0.0, 0.0, 0.0};
  first.metrics["loss_spikes"] = {0.0, std::nullopt, 0.0};
  first.metrics["skipped_steps"] = {0.0, 0.0, 1.0};            // changes: a chart
  first.metrics["epoch"] = {std::nullopt, std::nullopt, 0.0};  // one value is no run-long constant
  report::RunData second;
  second.steps = {1, 2};
  second.metrics["comm_s"] = {0.0, 0.0};
  second.metrics["loss_spikes"] = {1.0, 1.0};  // constant in each run, not over both

  const std::map<std::string, double> constants = report::constant_metrics({first, second});
  CHECK(constants == std::map<std::string, double>{{"comm_s", 0.0}});
  CHECK(report::constant_metrics({first}) == std::map<std::string, double>{{"comm_s", 0.0}, {"loss_spikes", 0.0}});

  const auto families = report::metric_families({first, second});
  REQUIRE(families.size() == 5);
  CHECK(families[0].first == "loss");
  CHECK(families[0].second == std::vector<std::string>{"loss", "eval/loss"});
  CHECK(families[1].first == "epoch");
  CHECK(families[2].first == "loss_spikes");
  CHECK(families[3].first == "rewards");
  CHECK(families[3].second == std::vector<std::string>{"eval/rewards/accuracy"});
  CHECK(families[4].first == "skipped_steps");

  const std::string html = report::render_report({first});
  CHECK(html.find("<table class=\"constants\">") != std::string::npos);
  CHECK(html.find("<tr><td>comm_s</td><td>0</td></tr>") != std::string::npos);
  CHECK(html.find("<tr><td>loss_spikes</td><td>0</td></tr>") != std::string::npos);
}

TEST_CASE("a malformed metrics line names its file and line", "[monitoring]") {
  const auto dir = testing::fresh_test_dir("report_bad");
  testing::write_text_file(dir, "metrics.jsonl", "{\"step\": 1}\n[1, 2]\n{\"step\": 3}\n");
  CHECK_THROWS_AS(report::read_run(dir), sdk::DataError);
  CHECK_THROWS_WITH(report::read_run(dir), Catch::Contains("metrics.jsonl:2"));
  CHECK_THROWS_WITH(report::read_run(dir / "missing"),
                    Catch::Contains("is") && Catch::Contains("a ptrain run directory"));
}

TEST_CASE("report pages escape names and configs and keep the data script closed", "[monitoring]") {
  CHECK(report::escape_html("<a href=\"x\">&'") == "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
  report::RunData run;
  run.name = "run</script>";
  run.config_toml = "name = \"</script><b>\"\n";
  run.steps = {1};
  run.metrics["loss"] = {1.0};
  std::vector<report::RunData> runs{run, run};
  report::make_run_names_unique(runs);
  CHECK(runs[1].name == "run</script> (2)");
  const std::string html = report::render_report(runs);
  // Exactly the page's own three closing script tags: the data, dygraphs and the page script.
  size_t closings = 0;
  for (size_t at = html.find("</script>"); at != std::string::npos; at = html.find("</script>", at + 1)) ++closings;
  CHECK(closings == 3);
  CHECK_THAT(html, Catch::Contains("name = &quot;&lt;/script&gt;&lt;b&gt;&quot;"));
  // Self-contained: nothing is loaded from elsewhere.
  CHECK_THAT(html, !Catch::Contains("<script src") && !Catch::Contains("<link"));
}
