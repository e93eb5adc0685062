#include "core/config/schema_markdown.h"

#include <cmath>
#include <sstream>

namespace ptrain::config {
namespace {

std::string format_bound(double value, sdk::ValueType type) {
  if (type == sdk::ValueType::kInt) return std::to_string(static_cast<int64_t>(value));
  std::ostringstream out;
  out << value;
  return out.str();
}

// Choices (each between `quote`s) or the range; "" when any value goes.
std::string allowed_values(const sdk::ConfigKey& key, const std::string& quote) {
  if (!key.choices.empty()) {
    std::string text;
    for (const std::string& choice : key.choices) text += (text.empty() ? "" : ", ") + quote + choice + quote;
    return text;
  }
  const bool closed = !key.min_exclusive && !key.max_exclusive;
  if (key.min && key.max && closed) return format_bound(*key.min, key.type) + " … " + format_bound(*key.max, key.type);
  std::string text;
  if (key.min) text = (key.min_exclusive ? "> " : "≥ ") + format_bound(*key.min, key.type);
  if (key.max) text += (text.empty() ? "" : ", ") + std::string(key.max_exclusive ? "< " : "≤ ") + format_bound(*key.max, key.type);
  return text;
}

// The default as written in TOML, or "required" / "unset".
std::string default_text(const sdk::ConfigKey& key, const std::string& quote) {
  if (key.default_value) return quote + sdk::format_config_value(*key.default_value) + quote;
  return key.required ? "required" : "unset";
}

// Markdown tables cannot hold a bare '|'.
std::string escape_cell(const std::string& text) {
  std::string escaped;
  for (const char c : text) escaped += c == '|' ? std::string("\\|") : std::string(1, c);
  return escaped;
}

}  // namespace

std::string schema_markdown(const std::vector<std::pair<std::string, sdk::ConfigSchema>>& sections) {
  std::ostringstream out;
  for (const auto& [name, schema] : sections) {
    out << "## " << (name.empty() ? "top level" : "[" + name + "]") << "\n\n";
    out << "| key | type | default | allowed | description |\n|---|---|---|---|---|\n";
    for (const sdk::ConfigKey& key : schema.keys()) {
      out << "| `" << key.name << "` | " << sdk::value_type_name(key.type) << " | "
          << escape_cell(default_text(key, "`")) << " | " << escape_cell(allowed_values(key, "`")) << " | "
          << escape_cell(key.doc) << " |\n";
    }
    out << "\n";
  }
  return out.str();
}

std::string schema_text(const sdk::ConfigSchema& schema) {
  std::ostringstream out;
  for (const sdk::ConfigKey& key : schema.keys()) {
    const std::string allowed = allowed_values(key, "");
    out << "  " << key.name << "  " << sdk::value_type_name(key.type) << ", default " << default_text(key, "")
        << (allowed.empty() ? "" : ", allowed: " + allowed) << "\n      " << key.doc << "\n";
  }
  return out.str();
}

}  // namespace ptrain::config
