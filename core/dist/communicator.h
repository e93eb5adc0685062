// The collectives the update step and metric reduction need.
//
// The single-process communicator runs the same code paths with world size 1
// (every collective is the identity), the way Marian's fake communicator does;
// the c10d implementation (Gloo on CPU, NCCL on GPU) plugs in behind the same
// interface. Every rank must call every collective in the same order.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

namespace ptrain::dist {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual int local_rank() const = 0;

  // In place; all tensors of one call are reduced together.
  virtual void all_reduce_sum(std::vector<at::Tensor>& tensors) = 0;
  virtual void all_reduce_max(std::vector<at::Tensor>& tensors) = 0;
  virtual void broadcast(std::vector<at::Tensor>& tensors, int root_rank) = 0;
  virtual void barrier() = 0;
};

std::unique_ptr<Communicator> make_single_process_communicator();

// Sums a scalar over ranks (one collective).
int64_t all_reduce_sum(Communicator& communicator, int64_t value);

}  // namespace ptrain::dist
