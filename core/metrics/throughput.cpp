#include "core/metrics/throughput.h"

namespace ptrain::metrics {

double training_flops(int64_t num_parameters, int64_t tokens) {
  return 6.0 * static_cast<double>(num_parameters) * static_cast<double>(tokens);
}

}  // namespace ptrain::metrics
