#include "core/report/report_html.h"

#include "core/log/progress.h"
#include "core/report/run_summary.h"
#include "core/report/sample_table.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <map>

namespace ptrain::report {
namespace assets {
// Generated at build time by cmake/embed_text_files.cmake (core/report/CMakeLists.txt).
extern const char kDygraphsJs[];
extern const char kDygraphsCss[];
extern const char kReportJs[];
extern const char kReportCss[];
}  // namespace assets

namespace {

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", value);
  return text;
}

// The data the page's script draws: runs with steps and aligned values, and the families.
nlohmann::json chart_data(const std::vector<RunData>& runs) {
  nlohmann::json data = {{"runs", nlohmann::json::array()}, {"families", nlohmann::json::array()}};
  for (const RunData& run : runs) {
    nlohmann::json metrics = nlohmann::json::object();
    for (const auto& [name, series] : run.metrics) {
      nlohmann::json values = nlohmann::json::array();
      for (const auto& value : series) {
        values.push_back(value && std::isfinite(*value) ? nlohmann::json(*value) : nlohmann::json(nullptr));
      }
      metrics[name] = std::move(values);
    }
    data["runs"].push_back({{"name", run.name}, {"steps", run.steps}, {"metrics", std::move(metrics)}});
  }
  for (const auto& [family, names] : metric_families(runs)) {
    data["families"].push_back({{"name", family}, {"metrics", names}});
  }
  return data;
}

// JSON inside <script>: "</" would end the element early.
std::string script_safe(std::string json) {
  for (size_t at = json.find("</"); at != std::string::npos; at = json.find("</", at + 3)) json.replace(at, 2, "<\\/");
  return json;
}

std::string overview_table(const std::vector<RunData>& runs, const std::vector<RunSummary>& summaries) {
  std::string html =
      "<table class=\"overview\"><tr><th>run</th><th>steps</th><th>final loss</th><th>best loss (step)</th>"
      "<th>tokens/s</th><th>train time</th><th>skipped steps</th></tr>\n";
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunSummary& summary = summaries[i];
    const auto loss = summary.metrics.find("loss");
    html += "<tr><td>" + escape_html(runs[i].name) + "</td><td>" + std::to_string(summary.last_step) + "</td><td>" +
            (loss != summary.metrics.end() ? number(loss->second.final_value) : "–") + "</td><td>" +
            (loss != summary.metrics.end()
                 ? number(loss->second.min_value) + " (" + std::to_string(loss->second.min_step) + ")"
                 : "–") +
            "</td><td>" + (summary.tokens_per_s ? number(*summary.tokens_per_s) : "–") + "</td><td>" +
            log::format_duration(summary.train_s) + "</td><td class=\"skipped\">" +
            std::to_string(summary.skipped_steps) + "</td></tr>\n";
  }
  return html + "</table>\n";
}

// Metrics with one value over the whole run get a line here instead of a chart.
std::string constants_table(const std::vector<RunData>& runs) {
  const std::map<std::string, double> constants = constant_metrics(runs);
  if (constants.empty()) return "";
  std::string html = "<table class=\"constants\"><tr><th>constant over the run" +
                     std::string(runs.size() > 1 ? "s" : "") + "</th><th>value</th></tr>\n";
  for (const auto& [name, value] : constants) {
    html += "<tr><td>" + escape_html(name) + "</td><td>" + number(value) + "</td></tr>\n";
  }
  return html + "</table>\n";
}

std::string run_section(const RunData& run, const RunSummary& summary) {
  std::string html = "<section class=\"run\"><h2>" + escape_html(run.name) + "</h2>\n<p class=\"where\">" +
                     escape_html(run.dir.string()) + " · " + std::to_string(summary.steps) + " steps logged · " +
                     number(summary.tokens) + " tokens</p>\n";
  html += "<table class=\"metrics\"><tr><th>metric</th><th>final</th><th>min (step)</th><th>max (step)</th></tr>\n";
  for (const auto& [name, metric] : summary.metrics) {
    html += "<tr><td>" + escape_html(name) + "</td><td>" + number(metric.final_value) + "</td><td>" +
            number(metric.min_value) + " (" + std::to_string(metric.min_step) + ")</td><td>" +
            number(metric.max_value) + " (" + std::to_string(metric.max_step) + ")</td></tr>\n";
  }
  html += "</table>\n" + sample_completions_table(run) + "<details><summary>config.toml</summary><pre>" +
          escape_html(run.config_toml.empty() ? "(no config.toml in the run directory)" : run.config_toml) +
          "</pre></details></section>\n";
  return html;
}

}  // namespace

std::string escape_html(const std::string& text) {
  std::string escaped;
  escaped.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        escaped += "&amp;";
        break;
      case '<':
        escaped += "&lt;";
        break;
      case '>':
        escaped += "&gt;";
        break;
      case '"':
        escaped += "&quot;";
        break;
      case '\'':
        escaped += "&#39;";
        break;
      default:
        escaped += c;
    }
  }
  return escaped;
}

void make_run_names_unique(std::vector<RunData>& runs) {
  std::map<std::string, int> seen;
  for (RunData& run : runs) {
    const int count = ++seen[run.name];
    if (count > 1) run.name += " (" + std::to_string(count) + ")";
  }
}

std::string render_report(const std::vector<RunData>& runs) {
  std::vector<RunSummary> summaries;
  std::string title = "ptrain report:";
  for (const RunData& run : runs) {
    summaries.push_back(summarize(run));
    title += " " + run.name;
  }
  std::string html = "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>" + escape_html(title) +
                     "</title>\n<style>" + assets::kDygraphsCss + "</style>\n<style>" + assets::kReportCss +
                     "</style>\n</head><body>\n<h1>" + escape_html(title) + "</h1>\n";
  html += overview_table(runs, summaries);
  html += constants_table(runs);
  html += "<div id=\"charts\"></div>\n";
  for (size_t i = 0; i < runs.size(); ++i) html += run_section(runs[i], summaries[i]);
  html += "<script id=\"ptrain-data\" type=\"application/json\">" + script_safe(chart_data(runs).dump()) +
          "</script>\n<script>" + assets::kDygraphsJs + "</script>\n<script>" + assets::kReportJs +
          "</script>\n</body></html>\n";
  return html;
}

}  // namespace ptrain::report
