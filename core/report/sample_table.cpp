#include "core/report/sample_table.h"

#include "core/report/report_html.h"

#include <cstdio>
#include <set>

namespace ptrain::report {
namespace {

std::string scores_text(const nlohmann::json& rewards) {
  std::string text;
  for (const auto& [name, value] : rewards.items()) {
    char figure[32];
    std::snprintf(figure, sizeof figure, "%.4g", value.is_number() ? value.get<double>() : 0.0);
    text += (text.empty() ? "" : ", ") + name + " " + figure;
  }
  return text;
}

std::string text_of(const nlohmann::json& sample, const char* field) {
  const auto found = sample.find(field);
  return found != sample.end() && found->is_string() ? found->get<std::string>() : "";
}

}  // namespace

std::string sample_completions_table(const RunData& run) {
  const size_t count = run.eval_samples.size();
  if (count == 0) return "";
  const std::set<size_t> shown{0, count / 2, count - 1};
  std::string html =
      "<details open><summary>sample completions (eval_samples.jsonl)</summary>\n<table class=\"samples\">"
      "<tr><th>step</th><th>prompt</th><th>completion</th><th>rewards</th></tr>\n";
  for (const size_t index : shown) {
    const nlohmann::json& line = run.eval_samples[index];
    const std::string step = std::to_string(line.value("step", int64_t{0}));
    for (const nlohmann::json& sample : line.value("samples", nlohmann::json::array())) {
      if (!sample.is_object()) continue;
      html += "<tr><td>" + step + "</td><td><code>" + escape_html(text_of(sample, "prompt")) + "</code></td><td><code>" +
              escape_html(text_of(sample, "completion")) + "</code></td><td>" +
              escape_html(scores_text(sample.value("rewards", nlohmann::json::object()))) + "</td></tr>\n";
    }
  }
  return html + "</table></details>\n";
}

}  // namespace ptrain::report
