#include "core/dist/layer_shards.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <utility>

namespace ptrain::dist {
namespace {

// One full [R·c] buffer, zero padding after the tensors' elements.
at::Tensor padded_flat(const std::vector<at::Tensor>& parts, int64_t numel, int64_t padded) {
  std::vector<at::Tensor> flat;
  for (const at::Tensor& part : parts) flat.push_back(part.reshape({-1}));
  at::Tensor out = at::cat(flat);
  if (padded > numel) out = at::cat({out, at::zeros({padded - numel}, out.options())});
  return out;
}

}  // namespace

LayerShards::LayerShards(std::vector<at::Tensor> tensors, Communicator& communicator, bool takes_gradients)
    : tensors_(std::move(tensors)), communicator_(communicator) {
  TORCH_CHECK(!tensors_.empty(), "layer shards: no tensors");
  for (const at::Tensor& tensor : tensors_) {
    TORCH_CHECK(tensor.is_floating_point() && tensor.scalar_type() == tensors_.front().scalar_type() &&
                    tensor.is_contiguous(),
                "layer shards: tensors must be contiguous, of one floating dtype");
    shapes_.push_back(tensor.sizes().vec());
    numels_.push_back(tensor.numel());
    numel_ += tensor.numel();
  }
  const int64_t world = communicator_.world_size();
  chunk_ = (numel_ + world - 1) / world;
  const at::NoGradGuard no_grad;
  const at::Tensor flat = padded_flat(tensors_, numel_, chunk_ * world);
  weight_shard_ = flat.narrow(0, communicator_.rank() * chunk_, chunk_).clone();
  if (takes_gradients) gradient_shard_ = at::zeros({chunk_}, weight_shard_.options().dtype(at::kFloat));
  release();
}

void LayerShards::gather() {
  at::Tensor full = at::empty({chunk_ * communicator_.world_size()}, weight_shard_.options());
  communicator_.all_gather(weight_shard_, full);
  int64_t offset = 0;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const int64_t n = numels_[i];
    // set_data keeps the tensor's identity and autograd metadata (its .grad, requires_grad).
    tensors_[i].set_data(full.narrow(0, offset, n).view(shapes_[i]));
    offset += n;
  }
  gathered_ = true;
}

void LayerShards::join_gather() {
  at::Tensor full = at::empty({chunk_ * communicator_.world_size()}, weight_shard_.options());
  communicator_.all_gather(weight_shard_, full);
}

void LayerShards::release() {
  for (at::Tensor& tensor : tensors_) tensor.set_data(at::empty({0}, weight_shard_.options()));
  gathered_ = false;
}

void LayerShards::reduce_scatter_gradients(const std::vector<at::Tensor>& gradients) {
  TORCH_CHECK(gradient_shard_.defined(), "layer shards: a frozen layer takes no gradients");
  TORCH_CHECK(gradients.size() == tensors_.size(), "layer shards: ", gradients.size(), " gradients for ",
              tensors_.size(), " tensors");
  std::vector<at::Tensor> parts;
  for (size_t i = 0; i < gradients.size(); ++i) {
    parts.push_back(gradients[i].defined() ? gradients[i].to(at::kFloat)
                                           : at::zeros(shapes_[i], weight_shard_.options().dtype(at::kFloat)));
  }
  at::Tensor full = padded_flat(parts, numel_, chunk_ * communicator_.world_size());
  at::Tensor summed = at::empty_like(gradient_shard_);
  communicator_.reduce_scatter_sum_async(full, summed)->wait();
  gradient_shard_.add_(summed);
}

}  // namespace ptrain::dist
