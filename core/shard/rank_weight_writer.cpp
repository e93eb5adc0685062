#include "core/shard/rank_weight_writer.h"

#include "core/model/safetensors.h"
#include "core/model/sharded_weights.h"
#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <map>
#include <memory>
#include <unordered_map>

namespace ptrain::shard {
namespace fs = std::filesystem;

namespace {

struct WeightTensor {
  std::string name;
  at::Tensor tensor;  // the model's own: empty while its layer is released
  std::vector<int64_t> shape;
  int64_t layer = -1;  // -1: replicated
  size_t index_in_layer = 0;
  int owner = 0;       // the rank that writes it
  int64_t bytes = 0;   // as saved
};

// The model's tensors in order, with their layer and saved size.
std::vector<WeightTensor> weight_tensors(const model::CausalLm& model, ShardedLayers& layers, at::ScalarType dtype) {
  std::unordered_map<const void*, std::pair<int64_t, size_t>> in_layer;
  for (size_t l = 0; l < layers.num_layers(); ++l) {
    const std::vector<at::Tensor>& tensors = layers.layer(l).tensors();
    for (size_t i = 0; i < tensors.size(); ++i) in_layer[tensors[i].unsafeGetTensorImpl()] = {l, i};
  }
  std::vector<WeightTensor> weights;
  for (const auto& [name, tensor] : model.named_parameters()) {
    WeightTensor weight{name, tensor, tensor.sizes().vec()};
    const auto found = in_layer.find(tensor.unsafeGetTensorImpl());
    if (found != in_layer.end()) {
      weight.layer = found->second.first;
      weight.index_in_layer = found->second.second;
      weight.shape = layers.layer(weight.layer).shape(found->second.second);
    }
    int64_t numel = 1;
    for (const int64_t size : weight.shape) numel *= size;
    weight.bytes = numel * static_cast<int64_t>(c10::elementSize(dtype));
    weights.push_back(std::move(weight));
  }
  return weights;
}

// [begin, end) index ranges of the groups: a layer's tensors, or one replicated tensor.
std::vector<std::pair<size_t, size_t>> groups_of(const std::vector<WeightTensor>& weights) {
  std::vector<std::pair<size_t, size_t>> groups;
  for (size_t begin = 0; begin < weights.size();) {
    size_t end = begin + 1;
    while (weights[begin].layer >= 0 && end < weights.size() && weights[end].layer == weights[begin].layer) ++end;
    groups.emplace_back(begin, end);
    begin = end;
  }
  return groups;
}

void assign_owners(std::vector<WeightTensor>& weights, const std::vector<std::pair<size_t, size_t>>& groups,
                   int world_size) {
  std::vector<int64_t> load(static_cast<size_t>(world_size), 0);
  for (const auto& [begin, end] : groups) {
    const auto owner = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    for (size_t i = begin; i < end; ++i) {
      weights[i].owner = owner;
      load[static_cast<size_t>(owner)] += weights[i].bytes;
    }
  }
}

struct WeightFile {
  std::string name;
  int owner = 0;
  std::vector<size_t> tensors;  // indices into the weights
};

// Each rank's tensors split by max_shard_bytes, the ranks' files in rank order.
std::vector<WeightFile> plan_files(const std::vector<WeightTensor>& weights, int world_size, int64_t max_shard_bytes) {
  std::vector<WeightFile> files;
  for (int rank = 0; rank < world_size; ++rank) {
    std::vector<size_t> owned;
    std::vector<int64_t> bytes;
    for (size_t i = 0; i < weights.size(); ++i) {
      if (weights[i].owner != rank) continue;
      owned.push_back(i);
      bytes.push_back(weights[i].bytes);
    }
    if (owned.empty()) continue;
    for (const std::vector<size_t>& shard : model::plan_weight_shards(bytes, max_shard_bytes)) {
      WeightFile file{"", rank, {}};
      for (const size_t k : shard) file.tensors.push_back(owned[k]);
      files.push_back(std::move(file));
    }
  }
  for (size_t k = 0; k < files.size(); ++k) files[k].name = model::weight_shard_name(k, files.size());
  return files;
}

// Index into `weights` of the tensor holding element `element` of `shards`'
// concatenation (layer `layer`), or weights.size() for the zero padding.
size_t tensor_at(const std::vector<WeightTensor>& weights, const dist::LayerShards& shards, int64_t layer,
                 int64_t element) {
  for (size_t j = 0; j < shards.num_tensors(); ++j) {
    int64_t numel = 1;
    for (const int64_t size : shards.shape(j)) numel *= size;
    if (element < numel) {
      for (size_t i = 0; i < weights.size(); ++i) {
        if (weights[i].layer == layer && weights[i].index_in_layer == j) return i;
      }
    }
    element -= numel;
  }
  return weights.size();
}

// The first tensor (in model order) that holds NaN or Inf on any rank's
// part of it, or weights.size(). Collective; reads chunks only.
size_t first_nonfinite(const std::vector<WeightTensor>& weights, ShardedLayers& layers,
                       dist::Communicator& communicator) {
  size_t first = weights.size();
  for (size_t i = 0; i < weights.size() && first == weights.size(); ++i) {
    const at::Tensor& tensor = weights[i].tensor;
    if (weights[i].layer < 0 && tensor.is_floating_point() && !at::isfinite(tensor).all().item<bool>()) first = i;
  }
  for (size_t l = 0; l < layers.num_layers(); ++l) {
    const at::Tensor& chunk = layers.layer(l).weight_shard();
    const at::Tensor bad = at::logical_not(at::isfinite(chunk)).nonzero();
    if (bad.numel() == 0) continue;
    const int64_t element = communicator.rank() * layers.layer(l).chunk() + bad[0][0].item<int64_t>();
    first = std::min(first, tensor_at(weights, layers.layer(l), static_cast<int64_t>(l), element));
  }
  std::vector<at::Tensor> latest{at::scalar_tensor(static_cast<double>(weights.size() - first), at::kDouble)};
  communicator.all_reduce_max(latest);
  return weights.size() - static_cast<size_t>(latest[0].item<double>());
}

// This rank's files, written tensor by tensor as the owner gets them. A
// tensor larger than the shard size has a file of its own, opened while the
// shard being filled stays open (plan_weight_shards' order).
class OwnFiles {
 public:
  OwnFiles(const fs::path& dir, const std::vector<WeightTensor>& weights, const std::vector<WeightFile>& files,
           int rank, at::ScalarType dtype)
      : dir_(dir), weights_(weights), dtype_(dtype) {
    for (const WeightFile& file : files) {
      if (file.owner != rank) continue;
      for (const size_t i : file.tensors) file_of_[i] = &file;
    }
  }

  // Writes tensor `index` (owned by this rank) into its file.
  void write(size_t index) {
    const WeightFile& file = *file_of_.at(index);
    std::unique_ptr<model::SafetensorsWriter>& writer = open_[&file];
    if (!writer) {
      std::vector<model::TensorHeader> headers;
      for (const size_t i : file.tensors) headers.push_back({weights_[i].name, dtype_, weights_[i].shape});
      writer = std::make_unique<model::SafetensorsWriter>(dir_ / file.name, headers);
    }
    writer->append(weights_[index].tensor.detach().to(at::kCPU, dtype_));
    if (index == file.tensors.back()) {
      writer->finish();
      open_.erase(&file);
    }
  }

 private:
  fs::path dir_;
  const std::vector<WeightTensor>& weights_;
  at::ScalarType dtype_;
  std::unordered_map<size_t, const WeightFile*> file_of_;
  std::map<const WeightFile*, std::unique_ptr<model::SafetensorsWriter>> open_;
};

void write_index(const fs::path& dir, const std::vector<WeightTensor>& weights, const std::vector<WeightFile>& files) {
  std::map<std::string, std::string> weight_map;
  int64_t total_size = 0;
  for (const WeightFile& file : files) {
    for (const size_t i : file.tensors) {
      weight_map[weights[i].name] = file.name;
      total_size += weights[i].bytes;
    }
  }
  model::write_weight_index(dir, weight_map, total_size);
}

}  // namespace

void write_weights_by_rank(const model::CausalLm& model, ShardedLayers& layers, dist::Communicator& communicator,
                           const fs::path& dir, at::ScalarType dtype, int64_t max_shard_bytes, const fs::path& target) {
  std::vector<WeightTensor> weights = weight_tensors(model, layers, dtype);
  const std::vector<std::pair<size_t, size_t>> groups = groups_of(weights);
  const size_t bad = first_nonfinite(weights, layers, communicator);
  if (bad < weights.size()) {
    throw sdk::Error(target.string() + ": refusing to write: weight tensor '" + weights[bad].name +
                     "' holds NaN or Inf");
  }
  assign_owners(weights, groups, communicator.world_size());
  const std::vector<WeightFile> files = plan_files(weights, communicator.world_size(), max_shard_bytes);

  const int rank = communicator.rank();
  OwnFiles own(dir, weights, files, rank, dtype);
  std::string failure;  // once set, this rank only keeps its peers' gathers going
  for (const auto& [begin, end] : groups) {
    const int64_t layer = weights[begin].layer;
    if (layer >= 0) layers.gather_exact(static_cast<size_t>(layer));
    for (size_t i = begin; i < end && weights[i].owner == rank && failure.empty(); ++i) {
      try {
        own.write(i);
      } catch (const sdk::Error& error) {
        failure = error.what();
      }
    }
    if (layer >= 0) layers.release(static_cast<size_t>(layer));
  }
  if (rank == 0 && files.size() > 1 && failure.empty()) {
    try {
      write_index(dir, weights, files);
    } catch (const sdk::Error& error) {
      failure = error.what();
    }
  }
  std::vector<at::Tensor> failed{at::scalar_tensor(failure.empty() ? -1.0 : rank, at::kDouble)};
  communicator.all_reduce_max(failed);
  if (!failure.empty()) throw sdk::Error(failure);
  const auto failed_rank = static_cast<int>(failed[0].item<double>());
  if (failed_rank >= 0) {
    throw sdk::Error(target.string() + ": rank " + std::to_string(failed_rank) + " could not write its weights (see its log)");
  }
}

}  // namespace ptrain::shard
