// The machine's fp32 matrix-multiply rate with this LibTorch and a given
// thread count: the denominator of the MFU figure. Large square products
// (the shape a GEMM is best at), best of several timed repeats, so the figure
// is a reachable peak for these cores, not a datasheet number.
//
// Two GEMMs are timed: at::mm (the system BLAS, what PyTorch eager runs) and
// model::mm (what ptrain's layers run: oneDNN when the build has it). The
// peak is the faster of the two, so that neither program's MFU can pass 1.
//
//   build/bin/bench_matmul_peak [threads] [size] [repeats]
//
// Prints one JSON object:
//   {"threads", "size", "flops_per_s", "aten_flops_per_s", "ptrain_flops_per_s", "ptrain_gemm"}.
#include "core/model/gemm.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>

namespace {

// FLOP/s of the fastest of `repeats` timed calls, after one warm-up call
// (thread pool, BLAS buffers, oneDNN's generated kernels, page faults).
double best_rate(const std::function<void()>& product, int64_t size, int repeats) {
  product();
  double best_s = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    product();
    best_s = std::min(best_s, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return 2.0 * static_cast<double>(size) * static_cast<double>(size) * static_cast<double>(size) / best_s;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int64_t size = argc > 2 ? std::atoll(argv[2]) : 2048;
  const int repeats = argc > 3 ? std::max(1, std::atoi(argv[3])) : 5;
  at::set_num_threads(threads);

  const at::Tensor a = at::randn({size, size});
  const at::Tensor b = at::randn({size, size});
  // Both return a new product, as the layers' calls do.
  at::Tensor c;
  const double aten = best_rate([&] { c = at::mm(a, b); }, size, repeats);
  const double ptrain = best_rate([&] { c = ptrain::model::mm(a, b); }, size, repeats);
  std::printf(
      "{\"threads\": %d, \"size\": %lld, \"flops_per_s\": %.6g, \"aten_flops_per_s\": %.6g, "
      "\"ptrain_flops_per_s\": %.6g, \"ptrain_gemm\": \"%s\"}\n",
      at::get_num_threads(), static_cast<long long>(size), std::max(aten, ptrain), aten, ptrain,
      ptrain::model::gemm_backend().c_str());
  return 0;
}
