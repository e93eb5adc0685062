#include "core/generation/model_source.h"

#include "core/io/read_file.h"
#include "core/model/lora_adapter_dir.h"
#include "core/tokenizer/hf_tokenizer.h"
#include "ptrain/sdk/errors.h"

#include <nlohmann/json.hpp>

#include <fstream>

namespace ptrain::generation {
namespace fs = std::filesystem;

namespace {

bool is_model_dir(const fs::path& dir) { return fs::is_regular_file(dir / "config.json"); }

// A run directory's latest complete checkpoint (checkpoints/latest names it).
fs::path latest_checkpoint(const fs::path& run_dir) {
  std::ifstream latest(run_dir / "checkpoints" / "latest");
  std::string name;
  if (!(latest >> name)) return {};
  return run_dir / "checkpoints" / name;
}

// adapter_config.json's base_model_name_or_path; empty when it has none.
std::string named_base(const fs::path& adapter_dir) {
  const nlohmann::json config =
      nlohmann::json::parse(io::read_file<sdk::ModelError>(adapter_dir / "adapter_config.json"), nullptr, false);
  if (!config.is_object() || !config.contains("base_model_name_or_path")) return "";
  const nlohmann::json& named = config["base_model_name_or_path"];
  return named.is_string() ? named.get<std::string>() : "";
}

ModelSource adapter_source(const fs::path& adapter_dir, const fs::path& base) {
  if (!base.empty()) {
    if (!is_model_dir(base)) {
      throw sdk::UsageError("--base " + base.string() + ": not a model directory (no config.json)");
    }
    return {base, adapter_dir};
  }
  const std::string named = named_base(adapter_dir);
  if (!named.empty() && is_model_dir(named)) return {named, adapter_dir};
  throw sdk::UsageError(adapter_dir.string() + " is a LoRA adapter: give its base model with --base DIR" +
                        (named.empty() ? std::string(" (its adapter_config.json names none)")
                                       : " (its adapter_config.json's base_model_name_or_path '" + named +
                                             "' is not a model directory here)"));
}

}  // namespace

ModelSource resolve_model_source(const fs::path& path, const fs::path& base) {
  if (!fs::is_directory(path)) throw sdk::UsageError("--model " + path.string() + ": no such directory");
  if (model::is_lora_adapter_dir(path)) return adapter_source(path, base);
  if (!base.empty()) {
    throw sdk::UsageError("--base " + base.string() + " is for a LoRA adapter, and " + path.string() +
                          " is not one (no adapter_config.json)");
  }
  if (is_model_dir(path)) return {path, {}};
  if (fs::is_directory(path / "final")) return resolve_model_source(path / "final", base);
  const fs::path checkpoint = latest_checkpoint(path);
  if (!checkpoint.empty() && fs::is_directory(checkpoint)) return resolve_model_source(checkpoint, base);
  throw sdk::UsageError("--model " + path.string() +
                        ": not a model directory (no config.json), a LoRA adapter (no adapter_config.json) or a run "
                        "directory (no final/ and no checkpoints/latest)");
}

LoadedModel load_model(const ModelSource& source, at::Device device) {
  const bool own_tokenizer = !source.adapter_dir.empty() && fs::is_regular_file(source.adapter_dir / "tokenizer.json");
  const fs::path tokenizer_dir = own_tokenizer ? source.adapter_dir : source.model_dir;
  if (!fs::is_regular_file(tokenizer_dir / "tokenizer.json")) {
    throw sdk::ConfigError(tokenizer_dir.string() +
                           ": no tokenizer.json (ptrain writes one into every model directory it saves; copy the "
                           "model's tokenizer files beside its config.json)");
  }
  auto tokenizer = tokenizer::HfTokenizer::load(tokenizer_dir / "tokenizer.json");
  tokenizer->set_chat_template(tokenizer->own_chat_template());

  LoadedModel loaded;
  loaded.model = model::CausalLm::load_hf_dir(source.model_dir, device);
  if (!source.adapter_dir.empty()) {
    loaded.model->add_lora(model::read_lora_adapter_dir(source.adapter_dir).spec, 0);
    model::load_lora_adapter_dir(*loaded.model, source.adapter_dir);
  }
  if (loaded.model->config().vocab_size < tokenizer->vocab_size()) {
    throw sdk::ConfigError(source.model_dir.string() + ": the model's vocab_size " +
                           std::to_string(loaded.model->config().vocab_size) + " is smaller than its tokenizer's " +
                           std::to_string(tokenizer->vocab_size()) + " ids");
  }
  loaded.tokenizer = std::move(tokenizer);
  return loaded;
}

std::string describe(const ModelSource& source) {
  if (source.adapter_dir.empty()) return source.model_dir.string();
  return source.adapter_dir.string() + " (LoRA adapter) on " + source.model_dir.string();
}

}  // namespace ptrain::generation
