// RunConfig → the resolved config.toml (config_loader.h: to_toml).
#include "core/config/config_loader.h"

#include "core/config/core_sections.h"
#include "core/config/key_suggestions.h"

#include <sstream>

namespace ptrain::config {
namespace {

void write_key(std::ostringstream& out, const std::string& key, const sdk::ConfigValue& value, const std::string& doc) {
  std::string line = key + " = " + sdk::format_config_value(value);
  if (!doc.empty()) {
    if (line.size() < 32) line.resize(32, ' ');
    line += "  # " + doc;
  }
  out << line << "\n";
}

std::string doc_of(const sdk::ConfigSchema& schema, const std::string& key) {
  const sdk::ConfigKey* spec = schema.find(key);
  return spec ? spec->doc : "";
}

}  // namespace

std::string to_toml(const RunConfig& config, const sdk::ConfigSchema& module_schema) {
  std::ostringstream out;
  out << "# Resolved by ptrain from " << config.source.string() << ": every key with its value, defaults included.\n"
      << "# Loading this file again gives the same run configuration.\n";
  for (const CoreSection& section : core_sections()) {
    out << "\n";
    if (!section.name.empty()) out << "[" << section.name << "]\n";
    for (const auto& [key, value] : section.write(config)) write_key(out, key, value, doc_of(section.schema, key));
  }

  out << "\n[" << kModuleSection << "]\n";
  const auto& entries = config.module.entries();
  for (const auto& spec : module_schema.keys()) {
    const auto it = entries.find(spec.name);
    if (it != entries.end()) write_key(out, spec.name, it->second.value, spec.doc);
  }
  for (const auto& [key, entry] : entries) {
    if (!module_schema.find(key)) write_key(out, key, entry.value, "");
  }
  return out.str();
}

}  // namespace ptrain::config
