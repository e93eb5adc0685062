#include "core/model/sharded_weights.h"

#include "core/model/safetensors.h"
#include "ptrain/sdk/errors.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>

namespace ptrain::model {

std::vector<std::vector<size_t>> plan_weight_shards(const std::vector<int64_t>& tensor_bytes, int64_t max_shard_bytes) {
  std::vector<std::vector<size_t>> shards;
  std::vector<size_t> current;
  int64_t current_bytes = 0;
  for (size_t i = 0; i < tensor_bytes.size(); ++i) {
    const int64_t bytes = tensor_bytes[i];
    if (max_shard_bytes > 0 && bytes > max_shard_bytes) {
      shards.push_back({i});  // alone, before the shard still being filled (as huggingface_hub orders them)
      continue;
    }
    if (max_shard_bytes > 0 && !current.empty() && current_bytes + bytes > max_shard_bytes) {
      shards.push_back(std::move(current));
      current.clear();
      current_bytes = 0;
    }
    current.push_back(i);
    current_bytes += bytes;
  }
  if (!current.empty() || shards.empty()) shards.push_back(std::move(current));
  return shards;
}

std::string weight_shard_name(size_t index, size_t count) {
  if (count == 1) return "model.safetensors";
  char name[64];
  std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", index + 1, count);
  return name;
}

std::vector<std::string> write_model_weights(const std::filesystem::path& dir,
                                             const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                                             int64_t max_shard_bytes) {
  std::vector<int64_t> tensor_bytes;
  tensor_bytes.reserve(tensors.size());
  for (const auto& named : tensors) tensor_bytes.push_back(named.second.numel() * named.second.element_size());
  const std::vector<std::vector<size_t>> shards = plan_weight_shards(tensor_bytes, max_shard_bytes);

  std::vector<std::string> files;
  std::map<std::string, std::string> weight_map;
  int64_t total_size = 0;
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string file = weight_shard_name(s, shards.size());
    std::vector<std::pair<std::string, at::Tensor>> shard;
    for (const size_t i : shards[s]) {
      shard.push_back(tensors[i]);
      weight_map[tensors[i].first] = file;
      total_size += tensor_bytes[i];
    }
    write_safetensors(dir / file, shard);
    files.push_back(file);
  }
  if (shards.size() > 1) files.push_back(write_weight_index(dir, weight_map, total_size));
  return files;
}

bool is_weight_file(const std::string& file_name) {
  const std::string suffix = ".safetensors";
  if (file_name == "model.safetensors.index.json") return true;
  return file_name.rfind("model", 0) == 0 && file_name.size() > 5 + suffix.size() &&
         file_name.compare(file_name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string write_weight_index(const std::filesystem::path& dir, const std::map<std::string, std::string>& weight_map,
                               int64_t total_size) {
  const std::string index_name = "model.safetensors.index.json";
  // nlohmann::json sorts the keys, as transformers writes them.
  const nlohmann::json index = {{"metadata", {{"total_size", total_size}}}, {"weight_map", weight_map}};
  std::ofstream out(dir / index_name);
  out << index.dump(2) << "\n";
  out.flush();
  if (!out) throw sdk::ModelError((dir / index_name).string() + ": write failed");
  return index_name;
}

}  // namespace ptrain::model
