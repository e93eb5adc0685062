#include "core/checkpoint/model_dir.h"

#include "core/model/lora_adapter_dir.h"
#include "core/model/sharded_weights.h"
#include "ptrain/sdk/errors.h"

#include <fstream>

namespace ptrain::checkpoint {
namespace fs = std::filesystem;

namespace {

// Files save_hf_dir owns; a second writer would silently replace them.
bool written_by_model(const std::string& name) {
  return name == "config.json" || name == "adapter_config.json" || name == "adapter_model.safetensors" ||
         model::is_weight_file(name);
}

}  // namespace

void write_model_dir(const model::CausalLm& model, const fs::path& dir, at::ScalarType dtype,
                     const ModelDirFiles& files, const fs::path& weights_from) {
  if (!weights_from.empty()) {
    model.save_hf_config(dir, dtype, files.model);
    for (const auto& entry : fs::directory_iterator(weights_from)) {
      const std::string name = entry.path().filename().string();
      if (model::is_weight_file(name)) fs::rename(entry.path(), dir / name);
    }
  } else if (model.lora()) {
    model::save_lora_adapter_dir(model, dir, dtype);
  } else {
    model.save_hf_dir(dir, dtype, files.model);
  }
  for (const auto& [name, text] : files.files) {
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == ".." || written_by_model(name)) {
      throw sdk::Error(dir.string() + ": cannot add file '" + name + "' to a model directory");
    }
    std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) throw sdk::Error((dir / name).string() + ": cannot write");
  }
}

}  // namespace ptrain::checkpoint
