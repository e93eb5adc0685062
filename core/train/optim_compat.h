// The torch::optim API differences between the LibTorch versions ptrain
// builds against (tested: 1.13 on Debian bookworm, 2.6 on trixie).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/version.h>

#include <sstream>
#include <string>

namespace ptrain::train::optim_compat {

// torch::optim keys its per-parameter state by the parameter's TensorImpl.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 2)
// LibTorch 2.2 keys by the address itself (pytorch#108480, which also removed
// c10::guts::to_string).
inline void* state_key(const at::Tensor& parameter) { return parameter.unsafeGetTensorImpl(); }
#else
// Before 2.2: by the address as text, written with operator<< as
// c10::guts::to_string did.
inline std::string state_key(const at::Tensor& parameter) {
  std::ostringstream text;
  text << parameter.unsafeGetTensorImpl();
  return text.str();
}
#endif

}  // namespace ptrain::train::optim_compat
