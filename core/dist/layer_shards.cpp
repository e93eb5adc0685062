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
  index_exact_elements();
  release();
}

void LayerShards::index_exact_elements() {
  std::vector<at::Tensor> ranges;
  int64_t offset = 0;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (shapes_[i].size() < 2) ranges.push_back(at::arange(offset, offset + numels_[i], at::kLong));
    offset += numels_[i];
  }
  const int64_t world = communicator_.world_size();
  const at::Tensor exact = ranges.empty() ? at::empty({0}, at::kLong) : at::cat(ranges);
  const at::Tensor owner = exact.div(chunk_, "floor");
  const at::Tensor counts = at::bincount(owner, {}, world);
  exact_slots_ = counts.numel() > 0 ? counts.max().item<int64_t>() : 0;
  const at::Tensor starts = counts.cumsum(0) - counts;  // each rank's first exact element, in `exact`
  const at::Tensor slot = at::arange(exact.numel(), at::kLong) - starts.index_select(0, owner);
  const at::Device device = weight_shard_.device();
  exact_ = exact.to(device);
  exact_low_slots_ = (owner * exact_slots_ + slot).to(device);
  local_exact_ = (exact.masked_select(owner == communicator_.rank()) - communicator_.rank() * chunk_).to(device);
}

int64_t LayerShards::message_halves() const { return (chunk_ + exact_slots_ + 1) / 2 * 2; }

bool LayerShards::rounds(at::ScalarType matrices_as) const {
  return matrices_as == at::kBFloat16 && weight_shard_.scalar_type() == at::kFloat;
}

// This rank's part of a rounding gather: [chunk] int16, the bfloat16 bits of
// every element (the upper half of its float32 bits for the exact ones),
// then [exact_slots_] int16, the lower halves of its exact elements', padded
// to an even count.
at::Tensor LayerShards::rounded_message() const {
  at::Tensor message = at::zeros({message_halves()}, weight_shard_.options().dtype(at::kShort));
  message.narrow(0, 0, chunk_).copy_(weight_shard_.to(at::kBFloat16).view(at::kShort));
  const int64_t exact = local_exact_.numel();
  if (exact > 0) {
    // A float32 is two int16 in memory: [low, high] on a little-endian host.
    const at::Tensor halves = weight_shard_.index_select(0, local_exact_).contiguous().view(at::kShort).view({exact, 2});
    message.narrow(0, 0, chunk_).index_copy_(0, local_exact_, halves.select(1, 1));
    message.narrow(0, chunk_, exact).copy_(halves.select(1, 0));
  }
  return message;
}

// Every rank's rounded_message(), [R, chunk + exact_slots_], back to float32.
at::Tensor LayerShards::unpack_rounded(const at::Tensor& messages) const {
  const int64_t world = communicator_.world_size();
  const at::Tensor rows = messages.view({world, message_halves()});
  const at::Tensor high = rows.narrow(1, 0, chunk_).reshape({-1});
  at::Tensor full = high.view(at::kBFloat16).to(at::kFloat);
  if (exact_.numel() > 0) {
    const at::Tensor low = rows.narrow(1, chunk_, exact_slots_).reshape({-1});
    const at::Tensor halves = at::stack({low.index_select(0, exact_low_slots_), high.index_select(0, exact_)}, 1);
    full.index_copy_(0, exact_, halves.contiguous().view(at::kFloat).view({-1}));
  }
  return full;
}

void LayerShards::start_gather(at::ScalarType matrices_as) {
  TORCH_CHECK(!in_flight_.work, "layer shards: a gather is already in flight");
  const at::NoGradGuard no_grad;
  in_flight_.rounded = rounds(matrices_as);
  // Rounded messages travel as int32 (pairs of halves): Gloo without
  // all-gather emulates it with an integer sum, which it lacks for int16.
  in_flight_.input = in_flight_.rounded ? rounded_message().view(at::kInt) : weight_shard_;
  in_flight_.output = at::empty({in_flight_.input.numel() * communicator_.world_size()}, in_flight_.input.options());
  in_flight_.work = communicator_.all_gather_async(in_flight_.input, in_flight_.output);
}

at::Tensor LayerShards::wait_gather() {
  TORCH_CHECK(in_flight_.work, "layer shards: no gather in flight");
  in_flight_.work->wait();
  at::Tensor output = in_flight_.output;
  const bool rounded = in_flight_.rounded;
  in_flight_ = InFlight{};
  return rounded ? unpack_rounded(output.view(at::kShort)) : output;
}

void LayerShards::gather(at::ScalarType matrices_as) {
  start_gather(matrices_as);
  finish_gather();
}

void LayerShards::finish_gather() {
  const at::NoGradGuard no_grad;
  const at::Tensor full = wait_gather();
  int64_t offset = 0;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const int64_t n = numels_[i];
    // set_data keeps the tensor's identity and autograd metadata (its .grad, requires_grad).
    tensors_[i].set_data(full.narrow(0, offset, n).view(shapes_[i]));
    offset += n;
  }
  gathered_ = true;
}

void LayerShards::join_gather(at::ScalarType matrices_as) {
  start_gather(matrices_as);
  in_flight_.work->wait();
  in_flight_ = InFlight{};
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
