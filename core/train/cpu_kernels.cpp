#include "core/train/cpu_kernels.h"

#include "ptrain/sdk/errors.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <vector>

namespace ptrain::train {
namespace {

struct Setting {
  const char* name;
  const char* value;
};

// Zen and Haswell kernels of OpenBLAS give the same sums (docs/reliability.md#the-same-run).
constexpr Setting kAvx2Environment[] = {
    {"ATEN_CPU_CAPABILITY", "avx2"}, {"ONEDNN_MAX_CPU_ISA", "AVX2"}, {"OPENBLAS_CORETYPE", "Haswell"}};

bool cpu_has_avx2() {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

bool cpu_has_avx512() {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
}

// This process's arguments as the kernel has them (argv is not passed down to the commands).
std::vector<std::string> own_arguments() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> arguments;
  for (size_t start = 0; start < text.size();) {
    const size_t end = text.find('\0', start);
    arguments.push_back(text.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return arguments;
}

[[noreturn]] void restart_self() {
  std::vector<std::string> arguments = own_arguments();
  if (arguments.empty()) throw std::runtime_error("runtime.cpu_kernels: cannot read /proc/self/cmdline to restart");
  std::vector<char*> argv;
  for (std::string& argument : arguments) argv.push_back(argument.data());
  argv.push_back(nullptr);
  execv("/proc/self/exe", argv.data());
  throw std::runtime_error(std::string("runtime.cpu_kernels: restarting with the AVX2 kernels failed: ") +
                           std::strerror(errno));
}

}  // namespace

bool avx2_kernels_pinned() {
  for (const Setting& setting : kAvx2Environment) {
    const char* value = std::getenv(setting.name);
    if (value == nullptr || std::string(value) != setting.value) return false;
  }
  return true;
}

void pin_cpu_kernels(const config::RunConfig& config) {
  if (config.runtime.cpu_kernels != config::CpuKernels::kAvx2 || avx2_kernels_pinned()) return;
  if (!cpu_has_avx2()) {
    throw sdk::ConfigError(config.source.string() +
                           ": runtime.cpu_kernels = \"avx2\" needs a CPU with AVX2 and FMA, which this one lacks; "
                           "set runtime.cpu_kernels = \"native\"");
  }
  for (const Setting& setting : kAvx2Environment) setenv(setting.name, setting.value, 1);
  restart_self();
}

std::string describe_cpu_kernels() {
  if (avx2_kernels_pinned()) return "AVX2 kernels, pinned";
  return std::string("native kernels: ") + (cpu_has_avx512() ? "AVX-512" : cpu_has_avx2() ? "AVX2" : "baseline");
}

}  // namespace ptrain::train
