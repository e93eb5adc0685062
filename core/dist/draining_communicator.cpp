#include "core/dist/draining_communicator.h"

namespace ptrain::dist {

void DrainingCommunicator::all_reduce_sum(std::vector<at::Tensor>& tensors) {
  drain();
  inner_.all_reduce_sum(tensors);
}

void DrainingCommunicator::all_reduce_max(std::vector<at::Tensor>& tensors) {
  drain();
  inner_.all_reduce_max(tensors);
}

void DrainingCommunicator::broadcast(std::vector<at::Tensor>& tensors, int root_rank) {
  drain();
  inner_.broadcast(tensors, root_rank);
}

void DrainingCommunicator::barrier() {
  drain();
  inner_.barrier();
}

std::unique_ptr<PendingCollective> DrainingCommunicator::all_reduce_sum_async(std::vector<at::Tensor>& tensors) {
  drain();
  return inner_.all_reduce_sum_async(tensors);
}

std::unique_ptr<PendingCollective> DrainingCommunicator::reduce_scatter_sum_async(at::Tensor& input,
                                                                                  at::Tensor& output) {
  drain();
  return inner_.reduce_scatter_sum_async(input, output);
}

std::unique_ptr<PendingCollective> DrainingCommunicator::all_gather_async(at::Tensor& input, at::Tensor& output) {
  drain();
  return inner_.all_gather_async(input, output);
}

}  // namespace ptrain::dist
