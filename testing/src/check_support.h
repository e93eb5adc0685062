// What the conformance checks share: comparisons with a tolerance, and the
// wording of a finished check.
#pragma once

#include "ptrain/sdk/metrics.h"
#include "ptrain/testing/conformance.h"

#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <vector>

namespace ptrain::testing {

// ‖actual − expected‖ / ‖expected‖ over all tensors, in double.
double relative_error(const std::vector<at::Tensor>& actual, const std::vector<at::Tensor>& expected);

// |actual − expected| ≤ tolerance · max(1, |expected|); NaN only equals NaN.
bool close(double actual, double expected, double tolerance);

std::string format_number(double value);

// Unit counts of the loss terms: "7" for one term, "[7, 30]" for several.
std::string units_text(const std::vector<int64_t>& units);

// Differences between two reduced metric maps, for the metrics whose
// reduction is split-invariant (sum, weighted_mean, max, min); "" when none.
std::string metric_differences(const std::map<std::string, double>& actual,
                               const std::map<std::string, double>& expected, const std::vector<sdk::MetricSpec>& specs,
                               double tolerance);

bool all_finite(const std::map<std::string, double>& metrics);

// A check's detail once it has run: what held, or `failure` and then the
// differences collected in check.detail.
CheckResult finished(CheckResult check, const std::string& success, const std::string& failure);

// `text` as a TOML string, for "key=value" overrides.
std::string toml_string(const std::string& text);

}  // namespace ptrain::testing
