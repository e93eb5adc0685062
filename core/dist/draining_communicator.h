// A Communicator that runs a hook before each of its collectives. Sharding
// "full" (shard::ShardedLayers) uses it so that every rank has finished the
// per-layer gathers and reduce-scatters its peers still issue (a rank with
// fewer microbatches or shorter generations joins them) before any other
// collective starts: the core's and the plugins' collectives then meet in the
// same order on every rank, as the Communicator contract requires.
#pragma once

#include "core/dist/communicator.h"

#include <functional>
#include <memory>
#include <vector>

namespace ptrain::dist {

class DrainingCommunicator final : public Communicator {
 public:
  // `inner` outlives this object.
  explicit DrainingCommunicator(Communicator& inner) : inner_(inner) {}

  // Runs before every collective below; empty (the default): nothing runs.
  void set_before_collective(std::function<void()> hook) { before_collective_ = std::move(hook); }
  Communicator& inner() { return inner_; }

  int rank() const override { return inner_.rank(); }
  int world_size() const override { return inner_.world_size(); }
  int local_rank() const override { return inner_.local_rank(); }
  int local_world_size() const override { return inner_.local_world_size(); }

  void all_reduce_sum(std::vector<at::Tensor>& tensors) override;
  void all_reduce_max(std::vector<at::Tensor>& tensors) override;
  void broadcast(std::vector<at::Tensor>& tensors, int root_rank) override;
  void barrier() override;
  std::unique_ptr<PendingCollective> all_reduce_sum_async(std::vector<at::Tensor>& tensors) override;
  std::unique_ptr<PendingCollective> reduce_scatter_sum_async(at::Tensor& input, at::Tensor& output) override;
  std::unique_ptr<PendingCollective> all_gather_async(at::Tensor& input, at::Tensor& output) override;

  double collective_seconds() const override { return inner_.collective_seconds(); }

 private:
  void drain() {
    if (before_collective_) before_collective_();
  }

  Communicator& inner_;
  std::function<void()> before_collective_;
};

}  // namespace ptrain::dist
