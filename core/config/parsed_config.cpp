#include "core/config/parsed_config.h"

namespace ptrain::config {

std::string ParsedConfig::location(const std::string& name, const toml::key& key, const toml::node& node) const {
  const auto it = overrides.find(name);
  if (it != overrides.end()) return it->second.location;
  auto line = key.source().begin.line;
  if (line == 0) line = node.source().begin.line;
  if (line == 0) {
    // A section that only exists because a --set created it.
    const auto sub = overrides.lower_bound(name + ".");
    if (sub != overrides.end() && sub->first.compare(0, name.size() + 1, name + ".") == 0) return sub->second.location;
  }
  return file_name() + ":" + std::to_string(line);
}

const toml::table* ParsedConfig::table(const std::string& section) const {
  if (section.empty()) return &root;
  const toml::node* node = root.get(section);
  return node ? node->as_table() : nullptr;
}

}  // namespace ptrain::config
