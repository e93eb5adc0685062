// The machine's fp32 matrix-multiply rate with this LibTorch and a given
// thread count: the denominator of the MFU figure. Large square at::mm calls
// (the shape BLAS is best at), best of several timed repeats, so the figure is
// a reachable peak for these cores, not a datasheet number.
//
//   build/bin/bench_matmul_peak [threads] [size] [repeats]
//
// Prints one JSON object: {"threads", "size", "flops_per_s"}.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int64_t size = argc > 2 ? std::atoll(argv[2]) : 2048;
  const int repeats = argc > 3 ? std::max(1, std::atoi(argv[3])) : 5;
  at::set_num_threads(threads);

  const at::Tensor a = at::randn({size, size});
  const at::Tensor b = at::randn({size, size});
  at::Tensor c = at::mm(a, b);  // warm-up: thread pool, BLAS buffers, page faults of c
  double best_s = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    at::mm_out(c, a, b);
    best_s = std::min(best_s, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  const double flops = 2.0 * static_cast<double>(size) * static_cast<double>(size) * static_cast<double>(size);
  std::printf("{\"threads\": %d, \"size\": %lld, \"flops_per_s\": %.6g}\n", at::get_num_threads(),
              static_cast<long long>(size), flops / best_s);
  return 0;
}
