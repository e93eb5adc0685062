// A complete Hugging Face model directory (docs/file-formats.md#model-directories), as final/ and each
// checkpoint's model are written (for a model with LoRA adapters, a PEFT
// adapter directory instead of config.json and the weights: lora_adapter_dir.h): the weights and config.json
// (CausalLm::save_hf_dir, sharded above a size) plus the files a user serves
// the model with — generation_config.json and the tokenizer's files. Those
// are given here as plain data by whoever knows them (core/train), so this
// component needs neither the tokenizer nor the config.
#pragma once

#include "core/model/causal_lm.h"

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace ptrain::checkpoint {

struct ModelDirFiles {
  model::CausalLm::SaveOptions model;  // config.json's extra fields (bos/eos ids), the shard size
  // Further files by name, written as given: generation_config.json,
  // tokenizer.json, tokenizer_config.json, special_tokens_map.json.
  std::vector<std::pair<std::string, std::string>> files;
};

// Writes the model in `dtype` and `files` into `dir` (a staging directory:
// atomicity is the caller's). A file name that is not a plain name, or one the
// model itself writes, throws sdk::Error. `weights_from`, when given, holds
// the weight files already written (a sharded run's ranks wrote them:
// shard/rank_weight_writer.h); they are moved into `dir` instead.
void write_model_dir(const model::CausalLm& model, const std::filesystem::path& dir, at::ScalarType dtype,
                     const ModelDirFiles& files, const std::filesystem::path& weights_from = {});

}  // namespace ptrain::checkpoint
