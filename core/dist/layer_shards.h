// The parameter sharding of one group of tensors (one decoder layer) under
// sharding "full" (ZeRO-3 / FSDP, docs/distributed.md#parameter-sharding-full; shard::ShardedLayers holds
// one per decoder layer).
//
// The group's float32 tensors are concatenated in order into n elements,
// padded with zeros to R·c (c = ceil(n / R)), and rank r keeps elements
// [r·c, (r+1)·c) as its master weights: the only copy of the group it holds
// between uses. gather() all-gathers the chunks into one full buffer and
// points every tensor at its slice (the tensors keep their identity, so the
// model and autograd see the same objects); release() drops that buffer
// again. Gradients of the full tensors are reduce-scattered into this
// rank's chunk and added to what earlier calls left there, so microbatches
// accumulate into the shard, never into full-size gradients.
#pragma once

#include "core/dist/communicator.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace ptrain::dist {

class LayerShards {
 public:
  // `tensors`: contiguous, of one floating dtype (float32 where they train),
  // on one device, with the same values on every rank (as loaded). Keeps
  // this rank's chunk, then releases them. Without `takes_gradients` (a
  // frozen model) there is no gradient chunk to reduce-scatter into.
  // `communicator` outlives this object.
  LayerShards(std::vector<at::Tensor> tensors, Communicator& communicator, bool takes_gradients = true);

  int64_t numel() const { return numel_; }
  // Tensor `index`'s shape as handed in, whether gathered or released.
  const std::vector<int64_t>& shape(size_t index) const { return shapes_.at(index); }
  size_t num_tensors() const { return shapes_.size(); }
  // The tensors handed in (the same objects, full or empty).
  const std::vector<at::Tensor>& tensors() const { return tensors_; }
  int64_t chunk() const { return chunk_; }
  int64_t element_size() const { return static_cast<int64_t>(weight_shard_.element_size()); }
  // [chunk] of the tensors' dtype, this rank's master weights; the optimizer
  // updates them in place (padding elements included: their gradient is always 0).
  at::Tensor& weight_shard() { return weight_shard_; }
  // [chunk] float32, the gradients summed over ranks and over every
  // reduce_scatter_gradients() since zero_gradients(); undefined without gradients.
  at::Tensor& gradient_shard() { return gradient_shard_; }

  // Collective. The tensors become full, with the current master weights.
  // `matrices_as` bfloat16 (float32 tensors computed under bf16-mixed): the
  // tensors of two or more dimensions, which only enter matrix products
  // whose operands are bfloat16 anyway, arrive rounded to bfloat16 as those
  // products would round them; the others (norm weights, biases) exactly.
  // That moves half the bytes for the same result.
  void gather(at::ScalarType matrices_as = at::kFloat);
  // Collective: takes part in a peer's gather() (with the same
  // `matrices_as`) without touching the tensors (a rank with nothing to
  // compute at that point).
  void join_gather(at::ScalarType matrices_as = at::kFloat);
  // gather() in two halves, so the chunks travel while the caller computes:
  // start_gather() issues the collective, finish_gather() waits for it and
  // makes the tensors full. One gather in flight at a time.
  void start_gather(at::ScalarType matrices_as = at::kFloat);
  void finish_gather();
  bool gather_in_flight() const { return in_flight_.work != nullptr; }
  // The tensors hold no elements until the next gather().
  void release();
  bool gathered() const { return gathered_; }

  // Collective. `gradients`: one per tensor, in order, of its shape (an
  // undefined one counts as zeros).
  void reduce_scatter_gradients(const std::vector<at::Tensor>& gradients);
  void zero_gradients() {
    if (gradient_shard_.defined()) gradient_shard_.zero_();
  }

 private:
  void index_exact_elements();
  bool rounds(at::ScalarType matrices_as) const;
  int64_t message_halves() const;
  at::Tensor rounded_message() const;
  at::Tensor unpack_rounded(const at::Tensor& messages) const;
  // The full float32 buffer of the gather in flight, once it arrives.
  at::Tensor wait_gather();

  struct InFlight {
    std::unique_ptr<PendingCollective> work;
    at::Tensor input, output;  // alive until the collective completes
    bool rounded = false;
  };
  InFlight in_flight_;

  std::vector<at::Tensor> tensors_;
  std::vector<std::vector<int64_t>> shapes_;  // as handed in: release() empties the tensors
  std::vector<int64_t> numels_;
  Communicator& communicator_;
  int64_t numel_ = 0;
  int64_t chunk_ = 0;
  at::Tensor weight_shard_;
  at::Tensor gradient_shard_;
  bool gathered_ = true;  // as handed in
  // Elements a rounding gather moves exactly (those of tensors of fewer than
  // two dimensions): their indices in the concatenation, their slots among
  // all ranks' lower halves (exact_slots_ per rank), and their positions in
  // this rank's chunk.
  at::Tensor exact_;
  at::Tensor exact_low_slots_;
  at::Tensor local_exact_;
  int64_t exact_slots_ = 0;
};

}  // namespace ptrain::dist
