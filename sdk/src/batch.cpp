#include "ptrain/sdk/batch.h"

namespace ptrain::sdk {

at::Tensor tensor_on_device(const at::Tensor& t, at::Device device) {
  if (!t.defined() || t.device() == device) return t;
  // Host memory is pageable here, so the copy is synchronous; it runs once
  // per microbatch before the loss loop, never inside it.
  return t.to(device);
}

TokenBatch batch_on_device(const TokenBatch& batch, at::Device device) {
  TokenBatch moved;
  moved.input_ids = tensor_on_device(batch.input_ids, device);
  moved.target_ids = tensor_on_device(batch.target_ids, device);
  moved.loss_mask = tensor_on_device(batch.loss_mask, device);
  moved.position_ids = tensor_on_device(batch.position_ids, device);
  moved.document_ids = tensor_on_device(batch.document_ids, device);
  return moved;
}

}  // namespace ptrain::sdk
