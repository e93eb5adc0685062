#include "core/model/lora_adapter_dir.h"

#include "core/model/safetensors.h"
#include "ptrain/sdk/errors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>

namespace ptrain::model {
namespace fs = std::filesystem;

namespace {

constexpr const char* kConfigFile = "adapter_config.json";
constexpr const char* kWeightsFile = "adapter_model.safetensors";

nlohmann::json adapter_config_json(const LoraSpec& spec, const std::string& base_model) {
  std::vector<std::string> targets;
  for (const LoraTarget target : all_lora_targets()) {
    if (spec.wraps(target)) targets.push_back(lora_target_name(target));
  }
  return {{"peft_type", "LORA"},
          {"task_type", "CAUSAL_LM"},
          {"r", spec.rank},
          {"lora_alpha", spec.alpha},
          {"use_rslora", spec.use_rslora},
          {"lora_dropout", spec.dropout},
          {"target_modules", targets},
          {"bias", "none"},
          {"fan_in_fan_out", false},
          {"inference_mode", true},
          {"base_model_name_or_path", base_model}};
}

// adapter_config.json's key `key`, checked with `valid`; `expected` says what it should be.
template <class Check>
const nlohmann::json& config_key(const nlohmann::json& config, const std::string& path, const char* key,
                                 const Check& valid, const std::string& expected) {
  if (!config.contains(key)) throw sdk::ModelError(path + ": key '" + key + "' is missing (expected " + expected + ")");
  const nlohmann::json& value = config[key];
  if (!valid(value)) {
    throw sdk::ModelError(path + ": key '" + key + "' = " + value.dump() + ", expected " + expected);
  }
  return value;
}

std::vector<LoraTarget> read_targets(const nlohmann::json& value, const std::string& path) {
  std::vector<LoraTarget> targets;
  for (const nlohmann::json& item : value) {
    const auto target = item.is_string() ? lora_target_from_name(item.get<std::string>()) : std::nullopt;
    if (!target) {
      throw sdk::ModelError(path + ": target_modules entry " + item.dump() +
                            " is not one of q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj");
    }
    if (std::find(targets.begin(), targets.end(), *target) == targets.end()) targets.push_back(*target);
  }
  return targets;
}

// PEFT keys that, set, change what the adapter computes or which modules it
// adapts, with why ptrain cannot honour them; PEFT writes each one out with
// its off value (false, null, {} or []), which is accepted.
struct UnsupportedKey {
  const char* key;
  const char* reason;
};
constexpr UnsupportedKey kUnsupportedKeys[] = {
    {"rank_pattern", "per-module ranks are not supported: ptrain gives every adapted projection r"},
    {"alpha_pattern", "per-module alphas are not supported: ptrain gives every adapted projection lora_alpha"},
    {"layers_to_transform", "adapting only some layers is not supported: ptrain adapts every decoder layer"},
    {"exclude_modules", "excluding modules is not supported: ptrain adapts target_modules in every decoder layer"},
    {"modules_to_save", "modules trained in full next to the adapters are not supported"},
    {"target_parameters", "adapting parameters rather than modules is not supported"},
    {"trainable_token_indices", "trainable token embeddings are not supported"},
    {"layer_replication", "layer replication is not supported"},
    {"fan_in_fan_out", "weights stored as (fan_in, fan_out) are not supported"},
    {"lora_bias", "a bias on lora_B is not supported"},
    {"use_dora", "DoRA (weight-decomposed LoRA) is not supported"},
    {"use_qalora", "QALoRA is not supported"},
    {"alora_invocation_tokens", "Activated LoRA (aLoRA) is not supported"},
    {"velora_config", "VeLoRA is not supported"},
    {"monteclora_config", "MonteCLoRA is not supported"},
    {"arrow_config", "Arrow routing is not supported"},
    {"use_bdlora", "block-diagonal LoRA is not supported"},
    {"kasa_config", "KaSA is not supported"},
};

bool is_off(const nlohmann::json& value) {
  return value.is_null() || value == false || (value.is_structured() && value.empty());
}

void refuse_unsupported_keys(const nlohmann::json& config, const std::string& path) {
  for (const UnsupportedKey& unsupported : kUnsupportedKeys) {
    const auto it = config.find(unsupported.key);
    if (it == config.end() || is_off(*it)) continue;
    throw sdk::ModelError(path + ": key '" + unsupported.key + "' = " + it->dump() + ": " + unsupported.reason +
                          " (ptrain reads plain LoRA, with use_rslora)");
  }
}

std::string target_list(const LoraSpec& spec) {
  std::string names;
  for (const LoraTarget target : all_lora_targets()) {
    if (spec.wraps(target)) names += (names.empty() ? "" : ", ") + lora_target_name(target);
  }
  return "[" + names + "]";
}

}  // namespace

bool is_lora_adapter_dir(const fs::path& dir) { return fs::exists(dir / kConfigFile); }

void save_lora_adapter_dir(const CausalLm& model, const fs::path& dir, at::ScalarType dtype) {
  TORCH_CHECK(model.lora().has_value(), "save_lora_adapter_dir: the model has no LoRA adapters");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw sdk::ModelError(dir.string() + ": cannot create adapter directory: " + ec.message());
  const fs::path config_path = dir / kConfigFile;
  std::ofstream out(config_path);
  out << adapter_config_json(*model.lora(), model.source_dir().string()).dump(2) << "\n";
  out.flush();
  if (!out) throw sdk::ModelError(config_path.string() + ": write failed");

  std::vector<std::pair<std::string, at::Tensor>> weights;
  for (const auto& [name, t] : model.named_parameters()) weights.emplace_back(name, t.detach().to(at::kCPU, dtype));
  write_safetensors(dir / kWeightsFile, weights);
}

LoraAdapter read_lora_adapter_dir(const fs::path& dir) {
  if (!fs::is_directory(dir)) throw sdk::ModelError(dir.string() + ": LoRA adapter directory does not exist");
  const fs::path config_path = dir / kConfigFile;
  const std::string path = config_path.string();
  std::ifstream in(config_path);
  if (!in) throw sdk::ModelError(path + ": cannot open (a PEFT adapter directory has one)");
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw sdk::ModelError(path + ": not valid JSON: " + e.what());
  }
  if (!config.is_object()) throw sdk::ModelError(path + ": not a JSON object");
  const auto is = [](const char* text) { return [text](const nlohmann::json& v) { return v == text; }; };
  config_key(config, path, "peft_type", is("LORA"), "\"LORA\"");
  if (config.contains("bias")) config_key(config, path, "bias", is("none"), "\"none\" (ptrain trains no biases)");
  LoraAdapter adapter;
  adapter.spec.rank =
      config_key(
          config, path, "r", [](const auto& v) { return v.is_number_integer() && v >= 1; }, "an integer >= 1")
          .get<int64_t>();
  adapter.spec.alpha =
      config_key(
          config, path, "lora_alpha", [](const auto& v) { return v.is_number() && v > 0; }, "a number > 0")
          .get<double>();
  if (config.contains("use_rslora")) {
    adapter.spec.use_rslora =
        config_key(
            config, path, "use_rslora", [](const auto& v) { return v.is_boolean(); }, "true or false")
            .get<bool>();
  }
  refuse_unsupported_keys(config, path);
  const auto& targets = config_key(
      config, path, "target_modules", [](const auto& v) { return v.is_array(); }, "a list of module names");
  adapter.spec.targets = read_targets(targets, path);
  if (adapter.spec.targets.empty()) throw sdk::ModelError(path + ": target_modules is empty");
  adapter.spec.dropout = config.value("lora_dropout", 0.0);
  const nlohmann::json base = config.value("base_model_name_or_path", nlohmann::json());
  if (base.is_string()) adapter.base_model = base.get<std::string>();
  const fs::path weights_path = dir / kWeightsFile;
  if (!fs::exists(weights_path)) {
    throw sdk::ModelError(weights_path.string() + ": missing (adapter_model.bin pickles are never loaded)");
  }
  adapter.weights = read_safetensors(weights_path);
  return adapter;
}

void check_lora_adapter_fits(const LoraAdapter& adapter, const LoraSpec& own, const fs::path& dir) {
  const std::string path = (dir / kConfigFile).string();
  if (adapter.spec.rank != own.rank) {
    throw sdk::ModelError(path + ": r = " + std::to_string(adapter.spec.rank) +
                          ", but lora.rank = " + std::to_string(own.rank));
  }
  if (adapter.spec.alpha != own.alpha) {
    throw sdk::ModelError(path + ": lora_alpha = " + nlohmann::json(adapter.spec.alpha).dump() +
                          ", but lora.alpha = " + nlohmann::json(own.alpha).dump());
  }
  if (adapter.spec.use_rslora != own.use_rslora) {
    throw sdk::ModelError(path + ": use_rslora = " + (adapter.spec.use_rslora ? "true" : "false") +
                          ", but lora.use_rslora = " + (own.use_rslora ? "true" : "false") +
                          " (the adapter's update is scaled by alpha / " + (adapter.spec.use_rslora ? "√r" : "r") +
                          ")");
  }
  if (target_list(adapter.spec) != target_list(own)) {
    throw sdk::ModelError(path + ": target_modules = " + target_list(adapter.spec) +
                          ", but lora.target_modules = " + target_list(own));
  }
}

void load_lora_adapter_dir(CausalLm& model, const fs::path& dir) {
  const LoraAdapter adapter = read_lora_adapter_dir(dir);
  check_lora_adapter_fits(adapter, *model.lora(), dir);
  model.load_lora_weights(adapter.weights, (dir / kWeightsFile).string());
}

}  // namespace ptrain::model
