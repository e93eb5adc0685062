// Model weights laid out as transformers' save_pretrained(max_shard_size=...)
// writes them: one model.safetensors while they fit the shard size, else
// shards model-00001-of-0000N.safetensors plus model.safetensors.index.json
//   {"metadata": {"total_size": <bytes of all tensors>}, "weight_map": {tensor name: shard file}}
// (reading either layout is load_hf_dir's).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace ptrain::model {

// The split huggingface_hub's split_torch_state_dict_into_shards makes, as
// indices into `tensor_bytes` (the tensors in save order): a tensor larger
// than the limit gets a shard of its own; otherwise it joins the current shard
// unless that would exceed the limit, which starts a new one. max_shard_bytes
// <= 0: everything in one shard.
std::vector<std::vector<size_t>> plan_weight_shards(const std::vector<int64_t>& tensor_bytes, int64_t max_shard_bytes);

// The shard file names transformers uses: model.safetensors for one shard,
// else model-00001-of-00003.safetensors, ...
std::string weight_shard_name(size_t index, size_t count);

// Whether `file_name` is one of the weight files above.
bool is_weight_file(const std::string& file_name);

// Writes model.safetensors.index.json into `dir` (`weight_map`: tensor name →
// shard file); returns its name. Throws sdk::ModelError if it cannot.
std::string write_weight_index(const std::filesystem::path& dir, const std::map<std::string, std::string>& weight_map,
                               int64_t total_size);

// Writes `tensors` (CPU, contiguous, in the dtype they are to be stored in)
// into `dir` in the layout above; returns the files written. Throws
// sdk::ModelError naming the file that could not be written.
std::vector<std::string> write_model_weights(const std::filesystem::path& dir,
                                             const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                                             int64_t max_shard_bytes);

}  // namespace ptrain::model
