// `dist_worker rank_weights DIR`: shard::write_weights_by_rank on real ranks.
// A sharded model's weights are written by every rank into DIR/float32
// (one file per rank here) and DIR/bfloat16 (small shards: several files per
// rank), then read back by each rank from the files alone and compared with
// an unsharded copy of the model; finally a NaN in the last rank's chunk of
// layer 1 must be refused on every rank alike, with nothing written.
#include "worker_layer_shards.h"

#include "core/dist/c10d_communicator.h"
#include "core/model/safetensors.h"
#include "core/shard/rank_weight_writer.h"
#include "core/shard/sharded_layers.h"
#include "ptrain/sdk/errors.h"
#include "support/test_util.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>

namespace ptrain::dist_test {
namespace fs = std::filesystem;

namespace {

constexpr uint64_t kSeed = 7;

// Every tensor of every safetensors file in `dir`, by name; the index's entries, if any.
std::map<std::string, at::Tensor> read_dir(const fs::path& dir, size_t& files, size_t& index_entries) {
  std::map<std::string, at::Tensor> tensors;
  files = 0;
  index_entries = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name == "model.safetensors.index.json") {
      index_entries = nlohmann::json::parse(std::ifstream(entry.path()))["weight_map"].size();
      continue;
    }
    ++files;
    for (auto& [tensor_name, tensor] : model::read_safetensors(entry.path())) tensors[tensor_name] = tensor;
  }
  return tensors;
}

// Largest difference from `expected` in `dtype`; infinity for a missing or extra tensor.
double difference(const std::map<std::string, at::Tensor>& got, const model::CausalLm& expected,
                  at::ScalarType dtype) {
  const auto named = expected.named_parameters();
  if (got.size() != named.size()) return std::numeric_limits<double>::infinity();
  double error = 0.0;
  for (const auto& [name, tensor] : named) {
    const auto found = got.find(name);
    if (found == got.end() || found->second.scalar_type() != dtype) return std::numeric_limits<double>::infinity();
    const at::Tensor want = tensor.detach().to(dtype).to(at::kDouble);
    error = std::max(error, (found->second.to(at::kDouble) - want).abs().max().item<double>());
  }
  return error;
}

// The name of the model's first tensor holding NaN.
std::string first_nan(const model::CausalLm& model) {
  for (const auto& [name, tensor] : model.named_parameters()) {
    if (at::isnan(tensor).any().item<bool>()) return name;
  }
  return "";
}

}  // namespace

int run_rank_weights(const dist::LaunchEnv& launch, const fs::path& dir) {
  auto communicator = dist::make_communicator(launch, std::chrono::seconds(30));
  const auto reference = model::CausalLm::init_random(testing::tiny_model_config(), kSeed);
  auto sharded = model::CausalLm::init_random(testing::tiny_model_config(), kSeed);
  shard::LayerCollectives collectives(*communicator);
  shard::ShardedLayers layers(*sharded, collectives);
  if (launch.rank == 0) {
    for (const char* sub : {"float32", "bfloat16", "nan"}) fs::create_directories(dir / sub);
  }
  communicator->barrier();

  nlohmann::json result{{"rank", launch.rank}, {"parameters", reference->named_parameters().size()}};
  const std::vector<std::pair<std::string, at::ScalarType>> writes{{"float32", at::kFloat},
                                                                   {"bfloat16", at::kBFloat16}};
  for (const auto& [sub, dtype] : writes) {
    const int64_t max_shard_bytes = dtype == at::kFloat ? 0 : 8'000;
    shard::write_weights_by_rank(*sharded, layers, *communicator, dir / sub, dtype, max_shard_bytes, dir / "target");
    communicator->barrier();
    size_t files = 0, index_entries = 0;
    const auto tensors = read_dir(dir / sub, files, index_entries);
    result[sub] = {{"files", files}, {"index_entries", index_entries}, {"error", difference(tensors, *reference, dtype)}};
  }
  bool released = true;
  for (size_t i = 0; i < sharded->num_layers(); ++i) {
    for (const at::Tensor& parameter : sharded->layer_parameters(i)) released = released && parameter.numel() == 0;
  }
  result["released"] = released;

  const int last = launch.world_size - 1;
  if (launch.rank == last) layers.layer(1).weight_shard()[0] = std::numeric_limits<float>::quiet_NaN();
  try {
    shard::write_weights_by_rank(*sharded, layers, *communicator, dir / "nan", at::kFloat, 0, dir / "target");
  } catch (const sdk::Error& error) {
    result["nan_error"] = error.what();
  }
  layers.gather(1);  // to see which tensor the NaN landed in
  result["nan_tensor"] = first_nan(*sharded);
  layers.release(1);
  communicator->barrier();
  result["nan_dir_empty"] = fs::is_empty(dir / "nan");
  std::cout << "RESULT " << result.dump() << std::endl;
  return 0;
}

}  // namespace ptrain::dist_test
