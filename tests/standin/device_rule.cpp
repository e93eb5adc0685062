#include "device_rule.h"

#include <ATen/ATen.h>

#include <optional>
#include <string>

namespace ptrain::standin {
namespace {

// Index operators move host indices to the device themselves on CUDA.
bool takes_host_indices(const c10::OperatorName& name) {
  return name.name == "aten::index" || name.name == "aten::index_put_" || name.name == "aten::index_put" ||
         name.name == "aten::_index_put_impl_";
}

struct Found {
  std::optional<at::Device> device;  // the first stand-in tensor's
  std::string host_argument;         // the first argument holding a host tensor that may not be there
};

void inspect(const at::Tensor& tensor, const std::string& argument, bool host_allowed, Found& found) {
  if (!tensor.defined()) return;
  if (tensor.device().type() == c10::DeviceType::PrivateUse1) {
    if (!found.device) found.device = tensor.device();
  } else if (tensor.is_cpu() && !host_allowed && tensor.dim() > 0 && found.host_argument.empty()) {
    found.host_argument = argument;
  }
}

}  // namespace

void apply_device_rule(const c10::OperatorHandle& op, torch::jit::Stack& stack) {
  const auto& arguments = op.schema().arguments();
  const size_t begin = stack.size() - arguments.size();
  const bool host_indices = takes_host_indices(op.schema().operator_name());
  Found found;
  for (size_t i = 0; i < arguments.size(); ++i) {
    const c10::IValue& value = stack[begin + i];
    const std::string& name = arguments[i].name();
    const bool host_allowed = host_indices && name == "indices";
    if (value.isTensor()) {
      inspect(value.toTensor(), name, host_allowed, found);
    } else if (value.isTensorList()) {
      for (const at::Tensor& tensor : value.toTensorVector()) inspect(tensor, name, host_allowed, found);
    } else if (value.isOptionalTensorList()) {
      for (const c10::optional<at::Tensor>& tensor : value.toOptionalTensorVector()) {
        if (tensor) inspect(*tensor, name, host_allowed, found);
      }
    }
  }
  if (!found.device) return;
  TORCH_CHECK(found.host_argument.empty(), "Expected all tensors to be on the same device, but found at least two ",
              "devices, ", *found.device, " and cpu! (stand-in device: argument '", found.host_argument, "' of ",
              op.schema().operator_name(), " is a host tensor)");
  // What is left on the host are 0-dim tensors (numbers) and host indices.
  for (size_t i = 0; i < arguments.size(); ++i) {
    c10::IValue& value = stack[begin + i];
    const c10::AliasInfo* alias = arguments[i].alias_info();
    const bool written = alias != nullptr && alias->isWrite();
    if (value.isTensor() && !written) {
      const at::Tensor& tensor = value.toTensor();
      if (tensor.defined() && tensor.is_cpu() && tensor.dim() == 0) value = tensor.to(*found.device);
    }
  }
}

}  // namespace ptrain::standin
