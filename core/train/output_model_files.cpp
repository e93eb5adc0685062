#include "core/train/output_model_files.h"

#include "core/config/byte_size.h"
#include "core/io/read_file.h"
#include "core/tokenizer/byte_tokenizer_files.h"
#include "core/tokenizer/chat_template_jinja.h"
#include "ptrain/sdk/errors.h"

#include <nlohmann/json.hpp>

namespace ptrain::train {
namespace {

namespace fs = std::filesystem;
using OrderedJson = nlohmann::ordered_json;  // keeps the input files' key order

OrderedJson read_json_object(const fs::path& path) {
  OrderedJson value;
  try {
    value = OrderedJson::parse(io::read_file<sdk::ConfigError>(path));
  } catch (const nlohmann::json::exception& error) {
    throw sdk::ConfigError(path.string() + ": not valid JSON: " + error.what());
  }
  if (!value.is_object()) throw sdk::ConfigError(path.string() + ": expected a JSON object");
  return value;
}

nlohmann::json id_or_null(int64_t id) { return id >= 0 ? nlohmann::json(id) : nlohmann::json(nullptr); }

int64_t max_shard_bytes(const std::string& max_shard_size) {
  if (max_shard_size.empty()) return 0;  // a config built in code, not read from TOML
  const std::optional<int64_t> bytes = config::parse_byte_size(max_shard_size);
  if (!bytes) throw sdk::ConfigError("checkpoint.max_shard_size = \"" + max_shard_size + "\": not a size like \"5GB\"");
  return *bytes;
}

// The input model's generation settings (sampling defaults, a list of stop
// ids, ...) are kept; the tokenizer's ids fill what it leaves out.
std::string generation_config(const std::string& model_init, const sdk::Tokenizer& tokenizer) {
  OrderedJson config = OrderedJson::object();
  if (!model_init.empty() && fs::exists(fs::path(model_init) / "generation_config.json")) {
    config = read_json_object(fs::path(model_init) / "generation_config.json");
  }
  const std::pair<const char*, int64_t> ids[] = {
      {"bos_token_id", tokenizer.bos_id()}, {"eos_token_id", tokenizer.eos_id()}, {"pad_token_id", tokenizer.pad_id()}};
  for (const auto& [key, id] : ids) {
    if (id >= 0 && (!config.contains(key) || config[key].is_null())) config[key] = id;
  }
  return config.dump(2) + "\n";
}

// tokenizer_config.json with the chat template the run rendered with.
std::string tokenizer_config(const fs::path& path, const config::TokenizerSection& section,
                             const sdk::Tokenizer& tokenizer) {
  OrderedJson config = fs::exists(path) ? read_json_object(path) : OrderedJson::object();
  const sdk::ChatTemplate* used = tokenizer.chat_template();
  // "auto" rendered with the input's own template, which stays as it is.
  if (used != nullptr && section.chat_template != config::ChatTemplateChoice::kAuto) {
    config["chat_template"] = tokenizer::chat_template_jinja(*used);
  }
  return config.dump(2) + "\n";
}

// The byte tokenizer's Hugging Face equivalent; there is no input template
// to keep, so "auto" (ptrain's plain template) is written too.
void add_byte_tokenizer_files(checkpoint::ModelDirFiles& files, const sdk::Tokenizer& tokenizer) {
  files.files.emplace_back("tokenizer.json", tokenizer::byte_tokenizer_json().dump(2) + "\n");
  OrderedJson config = tokenizer::byte_tokenizer_config();
  if (const sdk::ChatTemplate* used = tokenizer.chat_template()) {
    config["chat_template"] = tokenizer::chat_template_jinja(*used);
  }
  files.files.emplace_back("tokenizer_config.json", config.dump(2) + "\n");
}

void add_hf_tokenizer_files(checkpoint::ModelDirFiles& files, const config::TokenizerSection& section,
                            const sdk::Tokenizer& tokenizer) {
  const fs::path tokenizer_json = section.path;
  const fs::path dir = tokenizer_json.parent_path();
  files.files.emplace_back("tokenizer.json", io::read_file<sdk::ConfigError>(tokenizer_json));
  files.files.emplace_back("tokenizer_config.json",
                           tokenizer_config(dir / "tokenizer_config.json", section, tokenizer));
  if (fs::exists(dir / "special_tokens_map.json")) {
    files.files.emplace_back("special_tokens_map.json", io::read_file<sdk::ConfigError>(dir / "special_tokens_map.json"));
  }
}

}  // namespace

checkpoint::ModelDirFiles output_model_files(const config::RunConfig& config, const sdk::Tokenizer& tokenizer) {
  checkpoint::ModelDirFiles files;
  files.model.config_fields = {{"bos_token_id", id_or_null(tokenizer.bos_id())},
                               {"eos_token_id", id_or_null(tokenizer.eos_id())}};
  files.model.max_shard_bytes = max_shard_bytes(config.checkpoint.max_shard_size);
  files.files.emplace_back("generation_config.json", generation_config(config.model.init, tokenizer));
  if (config.tokenizer.kind == config::TokenizerKind::kBytes) {
    add_byte_tokenizer_files(files, tokenizer);
  } else {
    add_hf_tokenizer_files(files, config.tokenizer, tokenizer);
  }
  return files;
}

}  // namespace ptrain::train
