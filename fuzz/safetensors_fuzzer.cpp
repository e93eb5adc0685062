// libFuzzer target: any bytes as a .safetensors file. A rejection must be an
// sdk::ModelError; anything else (another exception, a crash, a sanitizer
// report, an allocation beyond -rss_limit_mb) is a bug.
#include "core/model/safetensors.h"
#include "fuzz_input_file.h"
#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = ptrain::fuzz::write_input(data, size, "input.safetensors");
  try {
    for (const auto& [name, tensor] : ptrain::model::read_safetensors(path)) {
      // Touch every byte read, so a wrong size shows up under ASan.
      if (tensor.numel() > 0) (void)tensor.to(at::kDouble).sum().item<double>();
    }
  } catch (const ptrain::sdk::ModelError&) {
  }
  return 0;
}
