#include "check_support.h"

#include <ATen/ATen.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <sstream>

namespace ptrain::testing {

double relative_error(const std::vector<at::Tensor>& actual, const std::vector<at::Tensor>& expected) {
  double difference = 0.0, reference = 0.0;
  for (size_t i = 0; i < expected.size(); ++i) {
    // On the host: one side may come from a model run on a device, the other from files.
    const at::Tensor expected_values = expected[i].to(at::kCPU, at::kDouble);
    difference += (actual.at(i).to(at::kCPU, at::kDouble) - expected_values).pow(2).sum().item<double>();
    reference += expected_values.pow(2).sum().item<double>();
  }
  return std::sqrt(difference) / std::max(std::sqrt(reference), 1e-30);
}

bool close(double actual, double expected, double tolerance) {
  if (std::isnan(actual) || std::isnan(expected)) return std::isnan(actual) && std::isnan(expected);
  return std::abs(actual - expected) <= tolerance * std::max(1.0, std::abs(expected));
}

std::string format_number(double value) {
  std::ostringstream out;
  out.precision(9);
  out << value;
  return out.str();
}

std::string units_text(const std::vector<int64_t>& units) {
  if (units.size() == 1) return std::to_string(units[0]);
  std::string text;
  for (const int64_t count : units) text += (text.empty() ? "[" : ", ") + std::to_string(count);
  return text + "]";
}

std::string metric_differences(const std::map<std::string, double>& actual,
                               const std::map<std::string, double>& expected, const std::vector<sdk::MetricSpec>& specs,
                               double tolerance) {
  std::string differences;
  for (const sdk::MetricSpec& spec : specs) {
    if (spec.reduction == sdk::Reduction::kMean) continue;
    const auto want = expected.find(spec.name);
    const auto got = actual.find(spec.name);
    if (want == expected.end() && got == actual.end()) continue;
    if (want == expected.end() || got == actual.end()) {
      differences += " '" + spec.name + "' " + (got == actual.end() ? "missing" : "unexpected") + ";";
    } else if (!close(got->second, want->second, tolerance)) {
      differences += " '" + spec.name + "' (" + sdk::reduction_name(spec.reduction) + ") " +
                     format_number(got->second) + " vs " + format_number(want->second) + ";";
    }
  }
  return differences;
}

bool all_finite(const std::map<std::string, double>& metrics) {
  for (const auto& [name, value] : metrics) {
    if (!std::isfinite(value)) return false;
  }
  return true;
}

CheckResult finished(CheckResult check, const std::string& success, const std::string& failure) {
  check.detail = check.passed ? success : failure + check.detail;
  return check;
}

std::string toml_string(const std::string& text) { return nlohmann::json(text).dump(); }

}  // namespace ptrain::testing
