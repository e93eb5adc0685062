#include "core/dist/gradient_sync.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

namespace ptrain::dist {

namespace {

std::vector<int64_t> numels_of(const std::vector<at::Tensor>& parameters) {
  std::vector<int64_t> numels;
  for (const at::Tensor& parameter : parameters) numels.push_back(parameter.numel());
  return numels;
}

}  // namespace

GradientSynchronizer::GradientSynchronizer(std::vector<at::Tensor> parameters, Communicator& communicator,
                                           int64_t bucket_bytes, bool sharded)
    : parameters_(std::move(parameters)),
      communicator_(communicator),
      sharded_(sharded && communicator.world_size() > 1),
      layout_(plan_buckets(numels_of(parameters_), bucket_bytes, sharded_ ? communicator.world_size() : 1)),
      bucket_of_(parameters_.size()),
      slot_of_(parameters_.size()),
      copied_(parameters_.size(), false) {
  const int shards = sharded_ ? communicator.world_size() : 1;
  for (size_t b = 0; b < layout_.size(); ++b) {
    const BucketLayout& layout = layout_[b];
    for (size_t slot = 0; slot < layout.parameters.size(); ++slot) {
      bucket_of_[layout.parameters[slot]] = b;
      slot_of_[layout.parameters[slot]] = slot;
    }
    // On the gradients' device: NCCL reduces it in place, with no host copy.
    const auto options = parameters_[layout.parameters.front()].options().dtype(at::kFloat);
    Bucket bucket;
    bucket.flat = at::zeros({layout.chunk * shards}, options);
    if (sharded_) bucket.shard = at::zeros({layout.chunk}, options);
    buckets_.push_back(std::move(bucket));
  }
  if (sharded_) pieces_ = shard_pieces(layout_, communicator.rank());
}

GradientSynchronizer::~GradientSynchronizer() { remove_hooks(); }

int64_t GradientSynchronizer::buffer_bytes() const {
  int64_t bytes = 0;
  for (const Bucket& bucket : buckets_) {
    bytes += static_cast<int64_t>(bucket.flat.nbytes());
    if (bucket.shard.defined()) bytes += static_cast<int64_t>(bucket.shard.nbytes());
  }
  return bytes;
}

void GradientSynchronizer::arm_for_last_backward() {
  if (communicator_.world_size() == 1) return;
  armed_ = true;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    hook_handles_.push_back(parameters_[i].register_hook([this, i](const at::Tensor& grad) { on_gradient(i, grad); }));
  }
}

at::Tensor GradientSynchronizer::slot(size_t parameter) {
  const size_t bucket = bucket_of_[parameter];
  return buckets_[bucket].flat.narrow(0, layout_[bucket].offsets[slot_of_[parameter]], parameters_[parameter].numel());
}

void GradientSynchronizer::on_gradient(size_t parameter, const at::Tensor& last_contribution) {
  at::Tensor bucket_slot = slot(parameter);
  const at::Tensor& accumulated = parameters_[parameter].grad();
  if (accumulated.defined()) {
    at::add_out(bucket_slot, accumulated.reshape({-1}), last_contribution.reshape({-1}));
  } else {
    bucket_slot.copy_(last_contribution.reshape({-1}));
  }
  if (!copied_[parameter]) {
    copied_[parameter] = true;
    ++buckets_[bucket_of_[parameter]].ready;
  }
  start_ready_buckets();
}

void GradientSynchronizer::start_ready_buckets() {
  while (next_to_start_ < buckets_.size() &&
         buckets_[next_to_start_].ready == layout_[next_to_start_].parameters.size()) {
    Bucket& bucket = buckets_[next_to_start_];
    if (sharded_) {
      // The padding must add nothing; an emulated reduce-scatter sums in place.
      const int64_t numel = layout_[next_to_start_].numel;
      bucket.flat.narrow(0, numel, bucket.flat.numel() - numel).zero_();
      bucket.pending = communicator_.reduce_scatter_sum_async(bucket.flat, bucket.shard);
    } else {
      std::vector<at::Tensor> tensors{bucket.flat};
      bucket.pending = communicator_.all_reduce_sum_async(tensors);
    }
    ++next_to_start_;
  }
}

void GradientSynchronizer::finish() {
  if (communicator_.world_size() == 1) return;
  remove_hooks();
  // Parameters whose hook did not fire (no last microbatch on this rank, or a
  // parameter the last microbatch did not use) contribute their .grad as is.
  for (size_t i = 0; i < parameters_.size(); ++i) {
    if (copied_[i]) continue;
    at::Tensor bucket_slot = slot(i);
    const at::Tensor& grad = parameters_[i].grad();
    if (grad.defined()) {
      bucket_slot.copy_(grad.reshape({-1}));
    } else {
      bucket_slot.zero_();
    }
    copied_[i] = true;
    ++buckets_[bucket_of_[i]].ready;
  }
  start_ready_buckets();
  for (size_t b = 0; b < buckets_.size(); ++b) {
    Bucket& bucket = buckets_[b];
    bucket.pending->wait();
    bucket.pending.reset();
    bucket.ready = 0;
    if (sharded_) continue;
    const BucketLayout& layout = layout_[b];
    for (size_t slot = 0; slot < layout.parameters.size(); ++slot) {
      at::Tensor& parameter = parameters_[layout.parameters[slot]];
      const at::Tensor summed = bucket.flat.narrow(0, layout.offsets[slot], parameter.numel()).view_as(parameter);
      if (parameter.grad().defined()) {
        parameter.mutable_grad().copy_(summed);
      } else {
        parameter.mutable_grad() = summed.clone();
      }
    }
  }
  std::fill(copied_.begin(), copied_.end(), false);
  next_to_start_ = 0;
}

void GradientSynchronizer::gather_parameters() {
  if (!sharded_) return;
  at::NoGradGuard no_grad;
  // The shard buffers are free once the optimizer has stepped, until the
  // next step's reduce-scatter.
  for (const ShardPiece& piece : pieces_) {
    const at::Tensor weights = parameters_[piece.parameter].detach().reshape({-1});
    buckets_[piece.bucket]
        .shard.narrow(0, piece.chunk_offset, piece.numel)
        .copy_(weights.narrow(0, piece.parameter_offset, piece.numel));
  }
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const BucketLayout& layout = layout_[b];
    Bucket& bucket = buckets_[b];
    communicator_.all_gather(bucket.shard, bucket.flat);
    for (size_t slot = 0; slot < layout.parameters.size(); ++slot) {
      at::Tensor parameter = parameters_[layout.parameters[slot]].detach();
      parameter.copy_(bucket.flat.narrow(0, layout.offsets[slot], parameter.numel()).view_as(parameter));
    }
  }
}

void GradientSynchronizer::remove_hooks() {
  if (!armed_) return;
  for (size_t i = 0; i < hook_handles_.size(); ++i) parameters_[i].remove_hook(hook_handles_[i]);
  hook_handles_.clear();
  armed_ = false;
}

}  // namespace ptrain::dist
