#include "core/train/stand_in_device.h"

#include "ptrain/sdk/errors.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string>

namespace ptrain::train {
namespace {

constexpr const char* kVariable = "PTRAIN_TEST_DEVICE";

// The library's entry: arms its report of host reads of device memory (a
// test framework may have replaced the signal handlers since the last run)
// and returns the device index.
using AttachFn = int (*)();

AttachFn load_attach(const std::string& path) {
  // Loaded once and never unloaded: its kernels stay registered with LibTorch.
  void* library = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    throw sdk::Error(std::string(kVariable) + "=" + path + ": cannot load the stand-in device: " + ::dlerror());
  }
  auto attach = reinterpret_cast<AttachFn>(::dlsym(library, "ptrain_standin_attach"));
  if (attach == nullptr) {
    throw sdk::Error(std::string(kVariable) + "=" + path +
                     ": not the stand-in device library (no ptrain_standin_attach)");
  }
  return attach;
}

}  // namespace

std::optional<at::Device> stand_in_device() {
  const char* path = std::getenv(kVariable);
  if (path == nullptr || *path == '\0') return std::nullopt;
  static const AttachFn attach = load_attach(path);
  return at::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(attach()));
}

}  // namespace ptrain::train
