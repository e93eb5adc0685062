// Hugging Face model directories: config.json with model.safetensors, or its
// shards and model.safetensors.index.json. CausalLm::load_hf_dir,
// load_hf_decoder, save_hf_dir and save_hf_config (causal_lm.h) are
// implemented here with these helpers.
#pragma once

#include "core/model/model_config.h"

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace ptrain::model {

// Names and shapes of every parameter of a CausalLm with `config`, with
// transformers' names in transformers' module order (named_parameters()).
std::vector<std::pair<std::string, std::vector<int64_t>>> expected_parameters(const ModelConfig& config);

// model.safetensors, or the shards named by model.safetensors.index.json,
// as stored. Throws sdk::ModelError naming the directory or the file.
std::vector<std::pair<std::string, at::Tensor>> read_model_tensors(const std::filesystem::path& dir);

// config.json's torch_dtype for the dtypes save_hf_dir writes (float32,
// bfloat16, float16); sdk::ModelError for any other.
std::string torch_dtype_name(at::ScalarType dtype);

}  // namespace ptrain::model
