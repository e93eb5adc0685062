// What `ptrain generate` and `ptrain eval` sample from: a model directory, a
// run directory (its final/, or its latest checkpoint before final/ exists),
// a checkpoint, or a LoRA adapter on its base model (docs/generation.md).
#pragma once

#include "core/model/causal_lm.h"
#include "ptrain/sdk/tokenizer.h"

#include <c10/core/Device.h>

#include <filesystem>
#include <memory>
#include <string>

namespace ptrain::generation {

struct ModelSource {
  std::filesystem::path model_dir;    // a Hugging Face model directory (config.json)
  std::filesystem::path adapter_dir;  // a PEFT LoRA adapter on model_dir; empty: none
};

// `path` as a model source; `base` (may be empty) is the base model of an
// adapter, which otherwise comes from its adapter_config.json's
// base_model_name_or_path when that is a directory here. Throws
// sdk::UsageError naming the path and what it lacks.
ModelSource resolve_model_source(const std::filesystem::path& path, const std::filesystem::path& base);

struct LoadedModel {
  std::unique_ptr<sdk::Tokenizer> tokenizer;  // the directory's tokenizer.json, its own chat template attached
  std::unique_ptr<model::CausalLm> model;     // float32 weights on `device`, adapters added
};

// The model (with its adapter) and the tokenizer saved beside it: the
// adapter directory's tokenizer.json when it has one, else the model's.
// Throws sdk::ModelError / sdk::ConfigError naming the file.
LoadedModel load_model(const ModelSource& source, at::Device device);

// "runs/sft/final" or "runs/lora/final (LoRA adapter) on models/base".
std::string describe(const ModelSource& source);

}  // namespace ptrain::generation
