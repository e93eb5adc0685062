#include "core/train/resume.h"

#include "core/checkpoint/atomic_dir.h"
#include "core/log/logger.h"
#include "core/model/lora_adapter_dir.h"
#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <sstream>

namespace ptrain::train {

std::map<std::string, std::string> config_values(const std::string& toml) {
  std::map<std::string, std::string> values;
  std::istringstream lines(toml);
  std::string section;
  for (std::string line; std::getline(lines, line);) {
    const size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    if (line[start] == '[') {
      section = line.substr(start + 1, line.find(']') - start - 1);
      continue;
    }
    const size_t equals = line.find('=');
    if (equals == std::string::npos) continue;
    std::string key = line.substr(start, equals - start);
    key.erase(key.find_last_not_of(" \t") + 1);
    std::string value = line.substr(equals + 1);
    bool in_string = false;
    size_t end = 0;
    for (; end < value.size(); ++end) {
      if (value[end] == '"' && (end == 0 || value[end - 1] != '\\')) in_string = !in_string;
      if (value[end] == '#' && !in_string) break;
    }
    value = value.substr(0, end);
    value.erase(0, value.find_first_not_of(" \t"));
    value.erase(value.find_last_not_of(" \t") + 1);
    values[section.empty() ? key : section + "." + key] = value;
  }
  return values;
}

std::vector<ConfigChange> config_changes(const std::string& before_toml, const std::string& after_toml) {
  const auto before = config_values(before_toml);
  const auto after = config_values(after_toml);
  std::vector<ConfigChange> changes;
  for (const auto& [key, value] : after) {
    const auto found = before.find(key);
    const std::string old_value = found == before.end() ? "(unset)" : found->second;
    if (old_value != value) changes.push_back({key, old_value, value});
  }
  for (const auto& [key, value] : before) {
    if (after.count(key) == 0) changes.push_back({key, value, "(unset)"});
  }
  return changes;
}

void check_resume_fits(const checkpoint::LoadedCheckpoint& loaded, const std::string& plugin_name,
                       const std::string& resolved_config_toml, const model::CausalLm& policy) {
  const std::string where = loaded.dir.string();
  if (loaded.trainer.plugin != plugin_name) {
    throw sdk::ConfigError(where + ": checkpoint of plugin '" + loaded.trainer.plugin +
                           "' cannot resume with plugin '" + plugin_name + "'");
  }
  if (loaded.adapter.has_value() != policy.lora().has_value()) {
    throw sdk::ConfigError(where + (loaded.adapter ? ": a LoRA checkpoint (adapter_config.json) cannot resume a run "
                                                     "without [lora] rank > 0"
                                                   : ": a full-model checkpoint cannot resume a run with [lora] "
                                                     "rank > 0 (it would need adapter_config.json)"));
  }
  if (loaded.adapter) model::check_lora_adapter_fits(*loaded.adapter, *policy.lora(), loaded.dir);
  if (loaded.model && loaded.model->config() != policy.config()) {
    throw sdk::ConfigError(where + ": the checkpoint's model (" + loaded.model->config().to_hf_json().dump() +
                           ") differs in shape from the configured one (" + policy.config().to_hf_json().dump() + ")");
  }
  for (const ConfigChange& change : config_changes(loaded.config_toml, resolved_config_toml)) {
    if (change.key == "output_dir") continue;
    log::warn("resume", change.key + " changed from " + change.before + " to " + change.after);
  }
}

void restore_policy(const checkpoint::LoadedCheckpoint& loaded, model::CausalLm& policy) {
  if (loaded.adapter) {
    // The base weights are model.init's again; only the adapters were trained.
    policy.load_lora_weights(loaded.adapter->weights, (loaded.dir / "adapter_model.safetensors").string());
    return;
  }
  const auto source = loaded.model->named_parameters();
  const auto target = policy.named_parameters();
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < target.size(); ++i) target[i].second.copy_(source[i].second);
}

void truncate_metrics(const std::filesystem::path& metrics_path, int64_t completed_steps) {
  std::ifstream in(metrics_path);
  if (!in) return;
  std::string kept;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    try {
      if (nlohmann::json::parse(line).at("step").get<int64_t>() > completed_steps) continue;
    } catch (const nlohmann::json::exception&) {
      continue;  // a line cut short by the crash
    }
    kept += line + "\n";
  }
  checkpoint::write_file_atomically(metrics_path, kept);
}

}  // namespace ptrain::train
