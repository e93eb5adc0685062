#include "core/model/finite_weights.h"

#include "ptrain/sdk/errors.h"

#include <ATen/ops/isfinite.h>
#include <ATen/ops/logical_not.h>

namespace ptrain::model {

void require_finite_weights(const at::Tensor& tensor, const std::string& name, const std::string& source) {
  if (!tensor.is_floating_point()) return;
  const at::Tensor finite = at::isfinite(tensor);
  if (finite.all().item<bool>()) return;
  const int64_t bad = at::logical_not(finite).sum().item<int64_t>();
  throw sdk::ModelError(source + ": tensor '" + name + "' holds " + std::to_string(bad) + " NaN or Inf values of " +
                        std::to_string(tensor.numel()) + "; input weights must be finite");
}

}  // namespace ptrain::model
