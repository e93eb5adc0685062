// Model FLOPs utilisation: achieved training FLOP/s over the matrix-multiply
// rate this process measures on its compute device, in its compute dtype.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>

namespace ptrain::metrics {

// The matrix-multiply peak a run's mfu is measured against: on the CPU the
// fastest of ten 1024² products with the current LibTorch thread setting
// (~0.2 s); on a GPU the mean of ten 8192² products after a warm-up, since
// small ones do not fill it. Operands in `dtype` (bfloat16 under bf16-mixed).
double measure_matmul_flops_per_s(at::Device device = at::kCPU, at::ScalarType dtype = at::kFloat);

// 6·params FLOPs per trained token (forward 2, backward 4; Kaplan et al. 2020),
// attention's T-dependent term left out.
double training_flops(int64_t num_parameters, int64_t tokens);

}  // namespace ptrain::metrics
