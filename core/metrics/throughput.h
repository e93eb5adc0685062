// Model FLOPs utilisation: achieved training FLOP/s over the fp32
// matrix-multiply rate this process measures on its own threads.
#pragma once

#include <cstdint>

namespace ptrain::metrics {

// The fastest of ten 1024² fp32 matmuls with the current LibTorch thread
// setting (~0.2 s).
double measure_matmul_flops_per_s();

// 6·params FLOPs per trained token (forward 2, backward 4; Kaplan et al. 2020),
// attention's T-dependent term left out.
double training_flops(int64_t num_parameters, int64_t tokens);

}  // namespace ptrain::metrics
