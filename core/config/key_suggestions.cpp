#include "core/config/key_suggestions.h"

#include "core/config/ascii_lower.h"
#include "core/config/core_sections.h"

#include <algorithm>
#include <cctype>
#include <map>

namespace ptrain::config {
namespace {

// Optimal-string-alignment distance: edits plus adjacent transpositions, so
// "micro_szie" is one edit from "micro_size".
size_t edit_distance(const std::string& a, const std::string& b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

// Names users bring from transformers/TRL TrainingArguments, mapped to ours.
const std::map<std::string, std::string>& known_aliases() {
  static const std::map<std::string, std::string> aliases = {
      {"learning_rate", "optim.lr"},
      {"max_grad_norm", "optim.clip_grad_norm"},
      {"adam_beta1", "optim.beta1"},
      {"adam_beta2", "optim.beta2"},
      {"adam_epsilon", "optim.eps"},
      {"optimizer", "optim.name"},
      {"lr_scheduler_type", "schedule.name"},
      {"scheduler", "schedule.name"},
      {"max_seq_length", "data.max_length"},
      {"per_device_train_batch_size", "batch.micro_size"},
      {"gradient_accumulation_steps", "batch.micro_size"},
      {"batch_size", "batch.global_size"},
      {"logging_steps", "train.log_every"},
      {"save_steps", "checkpoint.every_steps"},
      {"save_total_limit", "checkpoint.keep_last"},
      {"model_name_or_path", "model.init"},
      {"num_hidden_layers", "model.num_layers"},
      {"num_attention_heads", "model.num_heads"},
      {"num_key_value_heads", "model.num_kv_heads"},
  };
  return aliases;
}

std::vector<std::string> key_names(const sdk::ConfigSchema& schema) {
  std::vector<std::string> names;
  for (const auto& key : schema.keys()) names.push_back(key.name);
  return names;
}

}  // namespace

std::string full_name(const std::string& section, const std::string& key) {
  return section.empty() ? key : section + "." + key;
}

std::string join(const std::vector<std::string>& items, const std::string& separator) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? separator : "") + items[i];
  return out;
}

std::optional<std::string> closest(const std::string& name, const std::vector<std::string>& candidates) {
  const std::string needle = ascii_lower(name);
  const size_t limit = std::min<size_t>(2, std::max<size_t>(1, needle.size() / 3));
  std::optional<std::string> best;
  size_t best_distance = limit + 1;
  for (const auto& candidate : candidates) {
    const std::string hay = ascii_lower(candidate);
    const size_t distance = edit_distance(needle, hay);
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  if (best) return best;
  for (const auto& candidate : candidates) {
    const std::string hay = ascii_lower(candidate);
    const auto& shorter = hay.size() < needle.size() ? hay : needle;
    const auto& longer = hay.size() < needle.size() ? needle : hay;
    if (shorter.size() >= 3 && longer.compare(0, shorter.size(), shorter) == 0) return candidate;
  }
  return std::nullopt;
}

std::string unknown_key_hint(const std::string& section, const std::string& key, const sdk::ConfigSchema& schema) {
  if (auto match = closest(key, key_names(schema))) return " (did you mean '" + *match + "'?)";
  const auto alias = known_aliases().find(ascii_lower(key));
  if (alias != known_aliases().end()) {
    const auto& target = alias->second;
    const std::string prefix = section + ".";
    if (!section.empty() && target.compare(0, prefix.size(), prefix) == 0)
      return " (did you mean '" + target.substr(prefix.size()) + "'?)";
    return " (did you mean '" + target + "'?)";
  }
  // The right key in the wrong section, e.g. `lr` at the top level.
  if (section != kModuleSection) {
    for (const CoreSection& other : core_sections()) {
      if (other.name != section && !other.name.empty() && other.schema.find(key)) {
        return " (did you mean '" + other.name + "." + key + "'?)";
      }
    }
  }
  if (schema.keys().empty()) return " (this section takes no keys)";
  return " (" + std::string(section.empty() ? "top-level keys" : "keys of [" + section + "]") + ": " +
         join(key_names(schema), ", ") + ")";
}

}  // namespace ptrain::config
