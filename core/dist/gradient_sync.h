// Sums gradients over ranks once per step, in buckets, starting each bucket's
// all-reduce during the backward pass of the step's last microbatch as soon
// as its gradients are final (DESIGN.md §2: never during earlier microbatches).
//
// A parameter's gradient is final when autograd hands it the last
// microbatch's contribution g: final = accumulated .grad + g. A hook copies
// that into the bucket; a full bucket starts its all-reduce while backward
// goes on. Buckets start strictly in index order on every rank, because c10d
// matches collectives by the order they are issued.
#pragma once

#include "core/dist/communicator.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace ptrain::dist {

class GradientSynchronizer {
 public:
  // Buckets hold about `bucket_bytes` of gradients each, in reverse parameter
  // order (the order backward produces them).
  GradientSynchronizer(std::vector<at::Tensor> parameters, Communicator& communicator, int64_t bucket_bytes);
  ~GradientSynchronizer();

  // Call before the last microbatch's backward (not at all with world size 1).
  void arm_for_last_backward();
  // Call after it, on every rank, even one that had no microbatch: starts the
  // buckets not started yet, waits for all, and writes the sums into .grad.
  void finish();

  int64_t num_buckets() const { return static_cast<int64_t>(buckets_.size()); }

 private:
  struct Bucket {
    std::vector<size_t> parameters;  // indices into parameters_
    std::vector<int64_t> offsets;    // element offset of each parameter in `flat`
    at::Tensor flat;                 // [numel] float32
    size_t ready = 0;
    std::unique_ptr<PendingCollective> pending;
  };

  void on_gradient(size_t parameter, const at::Tensor& last_contribution);
  void start_ready_buckets();
  void remove_hooks();

  std::vector<at::Tensor> parameters_;
  Communicator& communicator_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;  // parameter index → bucket index
  std::vector<size_t> slot_of_;    // parameter index → position within its bucket
  std::vector<bool> copied_;       // the parameter's final gradient is in its bucket
  std::vector<unsigned> hook_handles_;
  size_t next_to_start_ = 0;
  bool armed_ = false;
};

}  // namespace ptrain::dist
