#include "worker_layer_shards.h"

#include "core/dist/c10d_communicator.h"
#include "core/dist/layer_shards.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <iostream>
#include <vector>

namespace ptrain::dist_test {
namespace {

// A layer of 26 elements in three tensors: chunks of 13 on 2 ranks, and on
// 4 ranks 7 each with 2 elements of padding on the last.
std::vector<at::Tensor> layer_tensors() {
  return {at::arange(15, at::kFloat).view({3, 5}) + 0.5, at::arange(7, at::kFloat) * -2.0,
          at::arange(4, at::kFloat).view({2, 2}) + 1000.0};
}

double max_error(const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& expected) {
  double error = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i].sizes() != expected[i].sizes()) return 1e30;
    error = std::max(error, (got[i] - expected[i]).abs().max().item<double>());
  }
  return error;
}

// Element e of the layer, counted over its tensors in order, belongs to rank e / chunk.
std::vector<at::Tensor> plus_owner_rank(const std::vector<at::Tensor>& tensors, int64_t chunk) {
  std::vector<at::Tensor> result;
  int64_t element = 0;
  for (const at::Tensor& tensor : tensors) {
    at::Tensor flat = tensor.reshape({-1}).clone();
    for (int64_t k = 0; k < flat.numel(); ++k, ++element) flat[k] += static_cast<double>(element / chunk + 1);
    result.push_back(flat.view(tensor.sizes()));
  }
  return result;
}

// This rank's chunk of `scale` · (the layer + 1), zero past the layer's elements.
at::Tensor expected_gradient_chunk(int rank, int64_t chunk, double scale) {
  at::Tensor flat = at::zeros({chunk * 8}, at::kFloat);
  int64_t element = 0;
  for (const at::Tensor& tensor : layer_tensors()) {
    for (int64_t k = 0; k < tensor.numel(); ++k, ++element) {
      flat[element] = scale * (tensor.reshape({-1})[k].item<double>() + 1.0);
    }
  }
  return flat.narrow(0, rank * chunk, chunk);
}

// Values bfloat16 cannot hold, of both signs; the 1-D tensor (norm-weight-like) straddles chunk boundaries.
std::vector<at::Tensor> unrounded_tensors() {
  return {at::arange(15, at::kFloat).view({3, 5}) * 0.1234567f - 1.0f, at::arange(7, at::kFloat) * -0.3333333f + 0.1f,
          at::arange(4, at::kFloat).view({2, 2}) + 1000.123f};
}

// gather(bfloat16): the matrices as bfloat16 rounds them, the 1-D tensor exactly.
double rounded_gather_error(dist::Communicator& communicator, bool& rounded) {
  const std::vector<at::Tensor> original = unrounded_tensors();
  std::vector<at::Tensor> parameters, expected;
  for (const at::Tensor& tensor : original) {
    parameters.push_back(tensor.clone().requires_grad_(true));
    expected.push_back(tensor.dim() >= 2 ? tensor.to(at::kBFloat16).to(at::kFloat) : tensor);
  }
  dist::LayerShards shards(parameters, communicator);
  shards.gather(at::kBFloat16);
  rounded = max_error(parameters, original) > 0.0;
  return max_error(parameters, expected);
}

}  // namespace

int run_layer_shards(const dist::LaunchEnv& launch) {
  auto communicator = dist::make_communicator(launch, std::chrono::seconds(30));
  const int world = launch.world_size, rank = launch.rank;
  const std::vector<at::Tensor> original = layer_tensors();
  std::vector<at::Tensor> parameters;
  for (const at::Tensor& tensor : original) parameters.push_back(tensor.clone().requires_grad_(true));

  dist::LayerShards shards(parameters, *communicator);
  bool released = true;
  for (const at::Tensor& parameter : parameters) released = released && parameter.numel() == 0;
  shards.gather();
  const double gather_error = max_error(parameters, original);

  // Rank r's gradient is (r+1)·(layer+1): summed over ranks, R(R+1)/2·(layer+1).
  std::vector<at::Tensor> gradients;
  for (const at::Tensor& tensor : original) gradients.push_back((tensor + 1.0) * (rank + 1.0));
  const double rank_sum = world * (world + 1) / 2.0;
  shards.reduce_scatter_gradients(gradients);
  const double single_error =
      (shards.gradient_shard() - expected_gradient_chunk(rank, shards.chunk(), rank_sum)).abs().max().item<double>();
  shards.reduce_scatter_gradients(gradients);  // a second microbatch accumulates
  const double accumulated_error =
      (shards.gradient_shard() - expected_gradient_chunk(rank, shards.chunk(), 2 * rank_sum))
          .abs()
          .max()
          .item<double>();

  // Each rank changes only its own master weights; a gather shows every rank's change.
  shards.release();
  shards.weight_shard().add_(rank + 1.0);
  shards.gather();
  const double update_error = max_error(parameters, plus_owner_rank(original, shards.chunk()));
  shards.zero_gradients();
  bool rounded = false;
  const double rounded_error = rounded_gather_error(*communicator, rounded);

  std::cout << "RESULT "
            << nlohmann::json{{"rank", rank},
                              {"released", released},
                              {"chunk", shards.chunk()},
                              {"gather_error", gather_error},
                              {"single_error", single_error},
                              {"accumulated_error", accumulated_error},
                              {"update_error", update_error},
                              {"rounded", rounded},
                              {"rounded_error", rounded_error},
                              {"grad_zeroed", shards.gradient_shard().abs().sum().item<double>() == 0.0}}
                   .dump()
            << std::endl;
  return 0;
}

}  // namespace ptrain::dist_test
