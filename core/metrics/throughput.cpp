#include "core/metrics/throughput.h"

#include "core/model/gemm.h"

#include <ATen/ATen.h>

#include <chrono>

namespace ptrain::metrics {

double measure_matmul_flops_per_s() {
  // 512² matmuls reach half the rate of large ones on 2 threads, which put
  // mfu above 1 for models whose matmuls are larger; 1024² is near the plateau
  // and takes ~15 ms each. The fastest repeat is kept: other processes only
  // ever slow a timing down.
  constexpr int64_t kSize = 1024;
  constexpr int kRepeats = 10;
  const at::Tensor a = at::randn({kSize, kSize});
  const at::Tensor b = at::randn({kSize, kSize});
  // The GEMM the model's layers run on (core/model/gemm.h).
  at::Tensor c = model::mm(a, b);  // warm-up: thread pool, BLAS buffers, oneDNN's generated kernels
  double best_seconds = 0.0;
  for (int i = 0; i < kRepeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    c = model::mm(a, b);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (i == 0 || seconds < best_seconds) best_seconds = seconds;
  }
  return 2.0 * kSize * kSize * kSize / best_seconds;
}

double training_flops(int64_t num_parameters, int64_t tokens) {
  return 6.0 * static_cast<double>(num_parameters) * static_cast<double>(tokens);
}

}  // namespace ptrain::metrics
