// Sums gradients over ranks once per step, in buckets, starting each bucket's
// collective during the backward pass of the step's last microbatch as soon
// as its gradients are final (docs/architecture.md#the-update-step: never during earlier microbatches).
//
// A parameter's gradient is final when autograd hands it the last
// microbatch's contribution g: final = accumulated .grad + g. A hook copies
// that into the bucket; a full bucket starts its collective while backward
// goes on. Buckets start strictly in index order on every rank, because c10d
// matches collectives by the order they are issued.
//
// Replicated (sharding "none"): each bucket is all-reduced and the sums are
// written back into every parameter's .grad. Sharded ("optimizer"): each
// bucket is reduce-scattered (bucket_layout.h), so a rank ends the step with
// the summed gradient of its own chunk of every bucket only, in
// gradient_shard(); .grad is left as the rank's local accumulation.
#pragma once

#include "core/dist/bucket_layout.h"
#include "core/dist/communicator.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace ptrain::dist {

class GradientSynchronizer {
 public:
  // `sharded` has an effect with more than one rank only.
  GradientSynchronizer(std::vector<at::Tensor> parameters, Communicator& communicator, int64_t bucket_bytes,
                       bool sharded = false);
  ~GradientSynchronizer();

  // Call before the last microbatch's backward (not at all with world size 1).
  void arm_for_last_backward();
  // Call after it, on every rank, even one that had no microbatch: starts the
  // buckets not started yet and waits for all. Replicated: writes the sums
  // into .grad; sharded: leaves this rank's chunks in gradient_shard().
  void finish();

  bool sharded() const { return sharded_; }
  const std::vector<BucketLayout>& layout() const { return layout_; }
  // Sharded: the parts of the parameters this rank owns, bucket by bucket.
  const std::vector<ShardPiece>& pieces() const { return pieces_; }
  int64_t num_buckets() const { return static_cast<int64_t>(buckets_.size()); }
  // Bytes of the buckets (and, sharded, the gradient shards) this rank holds.
  int64_t buffer_bytes() const;
  // Sharded: this rank's chunk of bucket `bucket`'s summed gradient, [chunk]
  // float32; stable storage for the life of the synchronizer.
  const at::Tensor& gradient_shard(size_t bucket) const { return buckets_[bucket].shard; }
  // Sharded, collective: every rank's pieces of the parameters (updated by
  // its optimizer) gathered into every rank's parameters.
  void gather_parameters();

 private:
  struct Bucket {
    at::Tensor flat;   // [chunk * shards] float32, zero padding after the parameters
    at::Tensor shard;  // sharded: [chunk], this rank's reduced chunk
    size_t ready = 0;
    std::unique_ptr<PendingCollective> pending;
  };

  at::Tensor slot(size_t parameter);
  void on_gradient(size_t parameter, const at::Tensor& last_contribution);
  void start_ready_buckets();
  void remove_hooks();

  std::vector<at::Tensor> parameters_;
  Communicator& communicator_;
  bool sharded_;
  std::vector<BucketLayout> layout_;
  std::vector<ShardPiece> pieces_;  // sharded: this rank's
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;  // parameter index → bucket index
  std::vector<size_t> slot_of_;    // parameter index → position within its bucket
  std::vector<bool> copied_;       // the parameter's final gradient is in its bucket
  std::vector<unsigned> hook_handles_;
  size_t next_to_start_ = 0;
  bool armed_ = false;
};

}  // namespace ptrain::dist
