// runtime.cpu_kernels: which instruction set the CPU kernels of LibTorch,
// oneDNN and OpenBLAS may use (docs/reliability.md#the-same-run).
//
// Each library picks its kernels once, from an environment variable or the
// CPU it finds: OpenBLAS when it is loaded, before main; LibTorch and oneDNN
// at their first kernel. So "avx2" is applied by restarting the process with
// those variables set, before anything has run.
#pragma once

#include "core/config/run_config.h"

#include <string>

namespace ptrain::train {

// The environment caps every library at AVX2 (what runtime.cpu_kernels =
// "avx2" sets, or a user set by hand).
bool avx2_kernels_pinned();

// Under runtime.cpu_kernels = "avx2", restarts this process (the same
// executable and arguments) with the variables that cap the kernels at AVX2,
// unless its environment has them already; returns only when no restart is
// needed. sdk::ConfigError naming the config file and key on a CPU without
// AVX2 and FMA. Only a launcher's own process may call it: it replaces the
// running program.
void pin_cpu_kernels(const config::RunConfig& config);

// "AVX2 kernels, pinned" or "native kernels: AVX-512": for logs and `ptrain validate`.
std::string describe_cpu_kernels();

}  // namespace ptrain::train
