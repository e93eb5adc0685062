// Model FLOPs utilisation: achieved training FLOP/s over the matrix-multiply
// rate the caller measured on its compute device, in its compute dtype
// (model::measure_gemm_flops_per_s).
#pragma once

#include <cstdint>

namespace ptrain::metrics {

// 6·params FLOPs per trained token (forward 2, backward 4; Kaplan et al. 2020),
// attention's T-dependent term left out.
double training_flops(int64_t num_parameters, int64_t tokens);

}  // namespace ptrain::metrics
