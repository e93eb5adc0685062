#include "core/metrics/metrics_sink.h"

#include "core/log/progress.h"
#include "ptrain/sdk/errors.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>

namespace ptrain::metrics {

JsonlMetricsWriter::JsonlMetricsWriter(const std::filesystem::path& path)
    : path_(path), out_(path, std::ios::app) {
  if (!out_) throw sdk::Error(path.string() + ": cannot open metrics file for writing");
}

void JsonlMetricsWriter::write(int64_t step, const std::map<std::string, double>& values) {
  nlohmann::json line = {{"step", step}};
  for (const auto& [name, value] : values) {
    // JSON has no NaN or infinity; null keeps the line valid and the key visible.
    line[name] = std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
  }
  out_ << line.dump() << '\n';
  out_.flush();
  if (!out_) throw sdk::Error(path_.string() + ": failed to write metrics");
}

std::string format_console_line(int64_t step, int64_t max_steps, const std::map<std::string, double>& values,
                                double eta_s, const std::vector<std::string>& extra) {
  std::string line = "step " + std::to_string(step) + "/" + std::to_string(max_steps);
  char buffer[64];
  const auto append = [&](const char* name, const char* label, const char* format) {
    const auto found = values.find(name);
    if (found == values.end()) return;
    std::snprintf(buffer, sizeof buffer, format, found->second);
    line += std::string(" | ") + label + " " + buffer;
  };
  append("loss", "loss", "%.4f");
  append("lr", "lr", "%.2e");
  append("grad_norm", "grad_norm", "%.3f");
  append("tokens_per_s", "tok/s", "%.0f");
  for (const std::string& name : extra) append(name.c_str(), name.c_str(), "%.4g");
  line += " | eta " + log::format_duration(eta_s);
  return line;
}

}  // namespace ptrain::metrics
