// Metrics over rows (pairs, completions) that reduce to exact global means.
#pragma once

#include "ptrain/sdk/metrics.h"

#include <ATen/core/Tensor.h>

#include <string>

namespace ptrain::sdk {

// Adds the mean of a per-row value ([rows], e.g. one value per pair or per
// completion) as a weighted_mean metric with the row count as its weight, so
// uneven microbatches and ranks reduce to the exact mean over the global
// batch's rows (docs/plugins.md, "Metrics"). Adds nothing for zero rows.
void add_row_mean(MetricList& metrics, const std::string& name, const at::Tensor& per_row);

}  // namespace ptrain::sdk
