#include "core/checkpoint/model_dir.h"

#include "core/model/lora_adapter_dir.h"
#include "ptrain/sdk/errors.h"

#include <fstream>

namespace ptrain::checkpoint {
namespace fs = std::filesystem;

namespace {

// Files save_hf_dir owns; a second writer would silently replace them.
bool written_by_model(const std::string& name) {
  return name == "config.json" || name == "adapter_config.json" || name == "adapter_model.safetensors" ||
         name == "model.safetensors.index.json" ||
         (name.rfind("model", 0) == 0 && name.size() > 12 && name.substr(name.size() - 12) == ".safetensors");
}

}  // namespace

void write_model_dir(const model::CausalLm& model, const fs::path& dir, at::ScalarType dtype,
                     const ModelDirFiles& files) {
  if (model.lora()) {
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
