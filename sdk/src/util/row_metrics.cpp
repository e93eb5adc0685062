#include "ptrain/sdk/util/row_metrics.h"

#include <ATen/ATen.h>

namespace ptrain::sdk {

void add_row_mean(MetricList& metrics, const std::string& name, const at::Tensor& per_row) {
  const auto rows = static_cast<double>(per_row.size(0));
  if (rows > 0) metrics.add(name, per_row.detach().to(at::kDouble).mean(), rows);
}

}  // namespace ptrain::sdk
