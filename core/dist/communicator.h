// The collectives the update step and metric reduction need.
//
// The single-process communicator runs the same code paths with world size 1
// (every collective is the identity), the way Marian's fake communicator does;
// the c10d implementation (Gloo on CPU, NCCL on GPU) plugs in behind the same
// interface. Every rank must call every collective in the same order. A
// failed or timed-out collective throws sdk::Error naming this rank and the
// operation.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

namespace ptrain::dist {

// A collective in flight.
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual int local_rank() const = 0;
  virtual int local_world_size() const = 0;

  // In place; all tensors of one call are reduced together.
  virtual void all_reduce_sum(std::vector<at::Tensor>& tensors) = 0;
  virtual void all_reduce_max(std::vector<at::Tensor>& tensors) = 0;
  virtual void broadcast(std::vector<at::Tensor>& tensors, int root_rank) = 0;
  virtual void barrier() = 0;
  // Starts a SUM all-reduce and returns at once; the tensors must stay alive
  // and untouched until wait() returns.
  virtual std::unique_ptr<PendingCollective> all_reduce_sum_async(std::vector<at::Tensor>& tensors) = 0;

  // Sharded data parallel (docs/distributed.md#sharding-distributedsharding), on one device's contiguous tensors.
  // Starts a SUM reduce-scatter and returns at once: `input` is
  // [world_size * chunk], and this rank's chunk of the sum over ranks lands
  // in `output` ([chunk]); `input` may be overwritten.
  virtual std::unique_ptr<PendingCollective> reduce_scatter_sum_async(at::Tensor& input, at::Tensor& output) = 0;
  // Starts an all-gather and returns at once: `output` ([world_size * chunk])
  // receives every rank's `input` ([chunk]) in rank order; both stay alive
  // and untouched until wait() returns.
  virtual std::unique_ptr<PendingCollective> all_gather_async(at::Tensor& input, at::Tensor& output) = 0;
  void all_gather(at::Tensor& input, at::Tensor& output) { all_gather_async(input, output)->wait(); }

  // Wall time this process has spent waiting in collectives.
  virtual double collective_seconds() const = 0;
};

std::unique_ptr<Communicator> make_single_process_communicator();

}  // namespace ptrain::dist
