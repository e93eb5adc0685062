// The rate of this process's matrix products, which a run's mfu is measured
// against (the metrics component takes the number; it does not run the model's
// GEMM itself).
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

namespace ptrain::model {

// FLOP/s of the GEMM the model's layers run (gemm.h) on `device` with
// operands in `dtype` (bfloat16 under bf16-mixed): on the CPU the fastest of
// ten 1024² products with the current LibTorch thread setting (~0.2 s); on a
// GPU the mean of ten 8192² products after a warm-up, since small ones do not
// fill it.
double measure_gemm_flops_per_s(at::Device device = at::kCPU, at::ScalarType dtype = at::kFloat);

}  // namespace ptrain::model
