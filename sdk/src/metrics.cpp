#include "ptrain/sdk/metrics.h"

#include <ATen/ATen.h>

namespace ptrain::sdk {

const char* reduction_name(Reduction reduction) {
  switch (reduction) {
    case Reduction::kSum:
      return "sum";
    case Reduction::kMean:
      return "mean";
    case Reduction::kMax:
      return "max";
    case Reduction::kMin:
      return "min";
    case Reduction::kWeightedMean:
      return "weighted_mean";
  }
  return "unknown";
}

void add_row_mean(MetricList& metrics, const std::string& name, const at::Tensor& per_row) {
  const auto rows = static_cast<double>(per_row.size(0));
  if (rows > 0) metrics.add(name, per_row.to(at::kDouble).sum().item<double>() / rows, rows);
}

}  // namespace ptrain::sdk
