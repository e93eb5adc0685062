#include "core/metrics/throughput.h"

#include <ATen/ATen.h>

#include <chrono>

namespace ptrain::metrics {

double measure_matmul_flops_per_s() {
  constexpr int64_t kSize = 512;
  constexpr int kRepeats = 8;
  const at::Tensor a = at::randn({kSize, kSize});
  const at::Tensor b = at::randn({kSize, kSize});
  at::Tensor c = at::matmul(a, b);  // warm-up: thread pool and BLAS buffers
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kRepeats; ++i) c = at::matmul(a, b);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return 2.0 * kSize * kSize * kSize * kRepeats / seconds;
}

double training_flops(int64_t num_parameters, int64_t tokens) {
  return 6.0 * static_cast<double>(num_parameters) * static_cast<double>(tokens);
}

}  // namespace ptrain::metrics
