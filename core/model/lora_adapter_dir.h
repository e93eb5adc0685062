// A PEFT LoRA adapter directory (DESIGN.md §6), as final/, best/ and the
// checkpoints of a LoRA run hold it and peft.PeftModel.from_pretrained reads it:
//
//   adapter_config.json        peft_type "LORA", r, lora_alpha, use_rslora, lora_dropout,
//                              target_modules, bias "none", task_type "CAUSAL_LM",
//                              base_model_name_or_path
//   adapter_model.safetensors  base_model.model.model.layers.<i>.<module>.lora_A.weight [r, in]
//                              and lora_B.weight [out, r] (lora_key)
#pragma once

#include "core/model/causal_lm.h"
#include "core/model/lora.h"

#include <ATen/core/Tensor.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace ptrain::model {

// Whether `dir` holds an adapter_config.json (an adapter, not a model).
bool is_lora_adapter_dir(const std::filesystem::path& dir);

// Writes `model`'s adapters (in `dtype`) and adapter_config.json into `dir`,
// creating it if needed. base_model_name_or_path is the model's source_dir().
void save_lora_adapter_dir(const CausalLm& model, const std::filesystem::path& dir, at::ScalarType dtype);

struct LoraAdapter {
  LoraSpec spec;
  std::string base_model;  // base_model_name_or_path; may be empty
  std::vector<std::pair<std::string, at::Tensor>> weights;
};

// Reads and checks adapter_config.json (a LORA adapter with bias "none",
// known target modules, r >= 1, and none of PEFT's options that ptrain cannot
// honour set: rank_pattern, alpha_pattern, use_dora, ...) and reads the
// weights. Throws sdk::ModelError naming the file and the key.
LoraAdapter read_lora_adapter_dir(const std::filesystem::path& dir);

// Throws sdk::ModelError naming adapter_config.json in `dir`, the key and
// both values, unless the adapter's r, lora_alpha, use_rslora and
// target_modules are `own`'s.
void check_lora_adapter_fits(const LoraAdapter& adapter, const LoraSpec& own, const std::filesystem::path& dir);

// Continues from an adapter directory: its r, lora_alpha, use_rslora and
// target_modules must be the model's (lora()), and every adapter tensor must
// be there with its shape, finite. Throws sdk::ModelError naming the directory, the key or tensor,
// and both values.
void load_lora_adapter_dir(CausalLm& model, const std::filesystem::path& dir);

}  // namespace ptrain::model
