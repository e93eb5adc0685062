#include "core/dist/communicator.h"

#include <ATen/ATen.h>

namespace ptrain::dist {
namespace {

class CompletedCollective final : public PendingCollective {
 public:
  void wait() override {}
};

class SingleProcessCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_world_size() const override { return 1; }
  void all_reduce_sum(std::vector<at::Tensor>&) override {}
  void all_reduce_max(std::vector<at::Tensor>&) override {}
  void broadcast(std::vector<at::Tensor>&, int) override {}
  void barrier() override {}
  std::unique_ptr<PendingCollective> all_reduce_sum_async(std::vector<at::Tensor>&) override {
    return std::make_unique<CompletedCollective>();
  }
  std::unique_ptr<PendingCollective> reduce_scatter_sum_async(at::Tensor& input, at::Tensor& output) override {
    if (!output.is_same(input)) output.copy_(input);
    return std::make_unique<CompletedCollective>();
  }
  std::unique_ptr<PendingCollective> all_gather_async(at::Tensor& input, at::Tensor& output) override {
    if (!output.is_same(input)) output.copy_(input);
    return std::make_unique<CompletedCollective>();
  }
  double collective_seconds() const override { return 0.0; }
};

}  // namespace

std::unique_ptr<Communicator> make_single_process_communicator() {
  return std::make_unique<SingleProcessCommunicator>();
}

}  // namespace ptrain::dist
