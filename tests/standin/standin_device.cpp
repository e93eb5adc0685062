// The test suite's stand-in device (docs/devices.md): LibTorch's PrivateUse1
// backend, registered when this library loads. Its memory is the arena's
// (device_arena.h), which the host cannot read; its copy kernels move bytes
// between the arena's shadow and the CPU; view and resize operators work on
// its tensors' metadata; every other operator applies CUDA's device rule
// (device_rule.h) and then runs its CPU kernel on copies (ATen's boxed CPU
// fallback, as out-of-tree backends do), copying results back.
//
// ptrain loads it from the path in PTRAIN_TEST_DEVICE (core/train/stand_in_device.h)
// and asks ptrain_standin_attach() for the device's index.
#include "device_arena.h"
#include "device_rule.h"
#include "fault_report.h"
#include "stand_in_guard.h"

#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/CPUFallback.h>
#include <c10/core/Allocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>
#include <torch/version.h>

#include <cstring>
#include <set>
#include <string>
#include <utility>
#include <vector>

// LibTorch 2.3 made Allocator::allocate non-const and added copy_data.
#define PTRAIN_STANDIN_TORCH_2_3 (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3))

namespace ptrain::standin {
namespace {

constexpr c10::DeviceType kStandIn = c10::DeviceType::PrivateUse1;
const c10::Device kDevice(kStandIn, 0);

void release_block(void* device_address) { DeviceArena::instance().release(device_address); }

class StandInAllocator final : public c10::Allocator {
 public:
#if PTRAIN_STANDIN_TORCH_2_3
  c10::DataPtr allocate(size_t bytes) override { return make(bytes); }
  void copy_data(void* destination, const void* source, std::size_t count) const override {
    DeviceArena& arena = DeviceArena::instance();
    std::memcpy(arena.host_bytes(destination), arena.host_bytes(source), count);
  }
#else
  c10::DataPtr allocate(size_t bytes) const override { return make(bytes); }
#endif
  c10::DeleterFnPtr raw_deleter() const override { return &release_block; }

 private:
  static c10::DataPtr make(size_t bytes) {
    void* address = DeviceArena::instance().allocate(bytes);
    return {address, address, &release_block, kDevice};
  }
};

StandInAllocator g_allocator;

bool on_stand_in(const at::Tensor& tensor) { return tensor.device().type() == kStandIn; }

// A CPU tensor over the same bytes: the shadow of a stand-in tensor, or a
// CPU tensor itself.
at::Tensor host_alias(const at::Tensor& tensor) {
  if (!on_stand_in(tensor)) {
    TORCH_CHECK(tensor.is_cpu(), "stand-in device: cannot copy to or from ", tensor.device());
    return tensor;
  }
  void* bytes = DeviceArena::instance().host_bytes(tensor.data_ptr());
  return at::from_blob(bytes, tensor.sizes(), tensor.strides(), tensor.options().device(at::kCPU));
}

at::Tensor empty_memory_format(c10::IntArrayRef size, c10::optional<at::ScalarType> dtype,
                               c10::optional<at::Layout> layout, c10::optional<at::Device> device,
                               c10::optional<bool> pin_memory, c10::optional<at::MemoryFormat> memory_format) {
  return at::detail::empty_generic(size, &g_allocator, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, c10::optional<at::ScalarType> dtype,
                         c10::optional<at::Layout> layout, c10::optional<at::Device> device,
                         c10::optional<bool> pin_memory) {
  return at::detail::empty_strided_generic(
      size, stride, &g_allocator, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), c10::dtype_or_default(dtype));
}

// Host ↔ device and device ↔ device, any dtypes, strides and broadcasts: the
// CPU's copy between the two sides' host bytes.
at::Tensor copy_from(const at::Tensor& source, const at::Tensor& destination, bool non_blocking) {
  if (source.numel() > 0 && destination.numel() > 0) host_alias(destination).copy_(host_alias(source));
  return destination;
}

// Storage for `bytes` bytes at least, its old bytes kept.
void grow_storage(c10::StorageImpl& storage, size_t bytes) {
  if (storage.nbytes() >= bytes) return;
  TORCH_CHECK(storage.resizable(), "stand-in device: trying to resize storage that is not resizable");
  c10::DataPtr grown = g_allocator.allocate(bytes);
  if (storage.nbytes() > 0) {
    DeviceArena& arena = DeviceArena::instance();
    std::memcpy(arena.host_bytes(grown.get()), arena.host_bytes(storage.data()), storage.nbytes());
  }
  storage.set_data_ptr_noswap(std::move(grown));
  storage.set_nbytes(bytes);
}

const at::Tensor& resize_in_place(const at::Tensor& self, c10::IntArrayRef size,
                                  c10::optional<at::MemoryFormat> memory_format) {
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  impl->set_sizes_contiguous(size);
  const size_t bytes = at::detail::computeStorageNbytesContiguous(size, self.dtype().itemsize(),
                                                                  static_cast<size_t>(impl->storage_offset()));
  grow_storage(*impl->storage().unsafeGetStorageImpl(), bytes);
  if (memory_format) {
    TORCH_CHECK(*memory_format != at::MemoryFormat::Preserve, "stand-in device: resize_ cannot preserve a format");
    impl->empty_tensor_restride(*memory_format);
  }
  return self;
}

at::Tensor copy_from_and_resize(const at::Tensor& source, const at::Tensor& destination) {
  if (!destination.sizes().equals(source.sizes())) resize_in_place(destination, source.sizes(), c10::nullopt);
  return copy_from(source, destination, false);
}

// Operators that only change a tensor's metadata (views, set_): the CPU
// kernel does that for any device.
void metadata_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
}

bool writes(const c10::Argument& argument) {
  return argument.alias_info() != nullptr && argument.alias_info()->isWrite();
}

bool is_tensor_list(const c10::Argument& argument) {
  return argument.type()->isSubtypeOf(*c10::ListType::ofTensors());
}

// Whether the operator writes into or returns a list of tensors (the foreach
// ops: _foreach_zero_, _foreach_mul_, _foreach_sqrt, ...): LibTorch 1.13's
// CPU fallback copies a written tensor back to the device and moves a
// returned one there, but leaves written and returned lists on the host.
bool handles_tensor_lists(const c10::FunctionSchema& schema) {
  for (const c10::Argument& argument : schema.arguments()) {
    if (writes(argument) && is_tensor_list(argument)) return true;
  }
  for (const c10::Argument& result : schema.returns()) {
    if (is_tensor_list(result)) return true;
  }
  return false;
}

// The products whose bfloat16 arithmetic the stand-in fixes, whatever the
// CPU under it: LibTorch 1.13's own bf16 kernel sums in bfloat16 where oneDNN
// has no bf16 matmul (a CPU without AVX-512), which a GPU never does.
bool is_bf16_product(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  static const std::set<std::string> products{"aten::mm",  "aten::bmm",     "aten::addmm", "aten::baddbmm",
                                              "aten::addbmm", "aten::mv", "aten::addmv", "aten::dot",
                                              "aten::vdot", "aten::_addmm_activation"};
  if (products.count(op.schema().name()) == 0) return false;
  // Mixed dtypes are left to the CPU kernel, which refuses them as CUDA's does.
  bool any_tensor = false;
  const size_t arguments = op.schema().arguments().size();
  for (size_t i = stack.size() - arguments; i < stack.size(); ++i) {
    if (!stack[i].isTensor() || !stack[i].toTensor().defined()) continue;
    if (stack[i].toTensor().scalar_type() != at::kBFloat16) return false;
    any_tensor = true;
  }
  return any_tensor;
}

// A device tensor's host copy; with `widen`, a bfloat16 one in float32.
at::Tensor host_copy(const at::Tensor& device, bool widen) {
  if (!device.defined()) return device;
  at::Tensor host = device.cpu();
  return widen && host.scalar_type() == at::kBFloat16 ? host.to(at::kFloat) : host;
}

// A result's device tensor: the written argument it is, or a new one (in
// bfloat16 again where its inputs were widened).
at::Tensor to_device(const at::Tensor& host, const std::vector<std::pair<at::Tensor, at::Tensor>>& written,
                     bool widen) {
  for (const auto& [device, copy] : written) {
    if (copy.is_same(host)) return device;
  }
  return widen && host.scalar_type() == at::kFloat ? host.to(kDevice, at::kBFloat16) : host.to(kDevice);
}

// Runs an operator's CPU kernel on host copies of its tensors, copies what it
// wrote back into the device tensors and moves its results there. With
// `widen`, bfloat16 operands compute in float32 and each result is rounded to
// bfloat16 once, as cuBLAS's bf16 products with float32 accumulation do.
void host_copies_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack, bool widen) {
  const std::vector<c10::Argument>& arguments = op.schema().arguments();
  const size_t first = stack->size() - arguments.size();
  std::vector<std::pair<at::Tensor, at::Tensor>> written;  // {device tensor, its host copy}
  for (size_t i = 0; i < arguments.size(); ++i) {
    c10::IValue& value = (*stack)[first + i];
    if (value.isTensor()) {
      const at::Tensor device = value.toTensor();
      const at::Tensor host = host_copy(device, widen);
      if (writes(arguments[i]) && device.defined()) written.emplace_back(device, host);
      value = host;
    } else if (value.isTensorList()) {
      std::vector<at::Tensor> hosts;
      for (const at::Tensor& device : value.toTensorVector()) {
        hosts.push_back(host_copy(device, widen));
        if (writes(arguments[i])) written.emplace_back(device, hosts.back());
      }
      value = c10::IValue(hosts);
    }
  }
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  for (const auto& [device, host] : written) copy_from(host, device, false);
  const size_t returns = op.schema().returns().size();
  for (size_t i = stack->size() - returns; i < stack->size(); ++i) {
    c10::IValue& value = (*stack)[i];
    if (value.isTensor()) {
      value = to_device(value.toTensor(), written, widen);
    } else if (value.isTensorList()) {
      std::vector<at::Tensor> on_device;
      for (const at::Tensor& host : value.toTensorVector()) on_device.push_back(to_device(host, written, widen));
      value = c10::IValue(on_device);
    }
  }
}

void fallback_to_cpu(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  apply_device_rule(op, *stack);
  const bool bf16_product = is_bf16_product(op, *stack);
  if (bf16_product || handles_tensor_lists(op.schema())) {
    host_copies_fallback(op, stack, bf16_product);
    return;
  }
  at::native::cpu_fallback(op, stack);
}

// `name` as "operator" or "operator.overload"; not every LibTorch version has them all.
bool operator_exists(const std::string& name) {
  const size_t dot = name.find('.');
  const std::string overload = dot == std::string::npos ? "" : name.substr(dot + 1);
  return c10::Dispatcher::singleton().findSchema({"aten::" + name.substr(0, dot), overload}).has_value();
}

}  // namespace
}  // namespace ptrain::standin

namespace at::detail {
C10_REGISTER_GUARD_IMPL(PrivateUse1, ptrain::standin::StandInGuard);
}  // namespace at::detail

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &ptrain::standin::g_allocator);

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace ptrain::standin;
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  m.impl("resize_", TORCH_FN(resize_in_place));
  // Views and set_ keep their tensor's storage; the fallback would copy it.
  for (const char* name : {"view", "as_strided", "_reshape_alias", "unfold", "set_.source_Storage",
                           "set_.source_Storage_storage_offset", "set_.source_Tensor", "set_"}) {
    if (operator_exists(name)) m.impl(name, torch::CppFunction::makeFromBoxedFunction<&metadata_kernel>());
  }
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&ptrain::standin::fallback_to_cpu>());
}

// ptrain's entry (core/train/stand_in_device.cpp): the device's index, with
// the fault report armed.
extern "C" __attribute__((visibility("default"))) int ptrain_standin_attach() {
  ptrain::standin::arm_fault_report();
  return ptrain::standin::kDevice.index();
}
