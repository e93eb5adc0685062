#include "core/dist/gradient_sync.h"

#include <ATen/ATen.h>

namespace ptrain::dist {

GradientSynchronizer::GradientSynchronizer(std::vector<at::Tensor> parameters, Communicator& communicator,
                                           int64_t bucket_bytes)
    : parameters_(std::move(parameters)),
      communicator_(communicator),
      bucket_of_(parameters_.size()),
      slot_of_(parameters_.size()),
      copied_(parameters_.size(), false) {
  Bucket current;
  int64_t current_numel = 0;
  const auto close_bucket = [&] {
    if (current.parameters.empty()) return;
    // On the gradients' device: NCCL reduces it in place, with no host copy.
    current.flat = at::zeros({current_numel}, parameters_[current.parameters.front()].options().dtype(at::kFloat));
    buckets_.push_back(std::move(current));
    current = Bucket{};
    current_numel = 0;
  };
  for (size_t i = parameters_.size(); i-- > 0;) {
    const int64_t numel = parameters_[i].numel();
    if (!current.parameters.empty() && (current_numel + numel) * 4 > bucket_bytes) close_bucket();
    bucket_of_[i] = buckets_.size();
    slot_of_[i] = current.parameters.size();
    current.parameters.push_back(i);
    current.offsets.push_back(current_numel);
    current_numel += numel;
  }
  close_bucket();
}

GradientSynchronizer::~GradientSynchronizer() { remove_hooks(); }

void GradientSynchronizer::arm_for_last_backward() {
  if (communicator_.world_size() == 1) return;
  armed_ = true;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    hook_handles_.push_back(parameters_[i].register_hook([this, i](const at::Tensor& grad) { on_gradient(i, grad); }));
  }
}

void GradientSynchronizer::on_gradient(size_t parameter, const at::Tensor& last_contribution) {
  Bucket& bucket = buckets_[bucket_of_[parameter]];
  at::Tensor slot = bucket.flat.narrow(0, bucket.offsets[slot_of_[parameter]], parameters_[parameter].numel());
  const at::Tensor& accumulated = parameters_[parameter].grad();
  if (accumulated.defined()) {
    at::add_out(slot, accumulated.reshape({-1}), last_contribution.reshape({-1}));
  } else {
    slot.copy_(last_contribution.reshape({-1}));
  }
  if (!copied_[parameter]) {
    copied_[parameter] = true;
    ++bucket.ready;
  }
  start_ready_buckets();
}

void GradientSynchronizer::start_ready_buckets() {
  while (next_to_start_ < buckets_.size() &&
         buckets_[next_to_start_].ready == buckets_[next_to_start_].parameters.size()) {
    std::vector<at::Tensor> tensors{buckets_[next_to_start_].flat};
    buckets_[next_to_start_].pending = communicator_.all_reduce_sum_async(tensors);
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
    Bucket& bucket = buckets_[bucket_of_[i]];
    at::Tensor slot = bucket.flat.narrow(0, bucket.offsets[slot_of_[i]], parameters_[i].numel());
    const at::Tensor& grad = parameters_[i].grad();
    if (grad.defined()) {
      slot.copy_(grad.reshape({-1}));
    } else {
      slot.zero_();
    }
    copied_[i] = true;
    ++bucket.ready;
  }
  start_ready_buckets();
  for (Bucket& bucket : buckets_) {
    bucket.pending->wait();
    bucket.pending.reset();
    for (size_t slot = 0; slot < bucket.parameters.size(); ++slot) {
      at::Tensor& parameter = parameters_[bucket.parameters[slot]];
      const at::Tensor summed = bucket.flat.narrow(0, bucket.offsets[slot], parameter.numel()).view_as(parameter);
      if (parameter.grad().defined()) {
        parameter.mutable_grad().copy_(summed);
      } else {
        parameter.mutable_grad() = summed.clone();
      }
    }
    bucket.ready = 0;
  }
  std::fill(copied_.begin(), copied_.end(), false);
  next_to_start_ = 0;
}

void GradientSynchronizer::remove_hooks() {
  if (!armed_) return;
  for (size_t i = 0; i < hook_handles_.size(); ++i) parameters_[i].remove_hook(hook_handles_[i]);
  hook_handles_.clear();
  armed_ = false;
}

}  // namespace ptrain::dist
