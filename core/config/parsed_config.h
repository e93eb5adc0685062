// A config file parsed as TOML, with the --set overrides applied, and where
// each value came from. Internal to core/config.
#pragma once

#include <toml++/toml.h>

#include <filesystem>
#include <map>
#include <string>

namespace ptrain::config {

struct Override {
  std::string location;  // "--set optim.lr=1e-5"
  std::string raw;       // the text after '=', used as is for string keys
};

struct ParsedConfig {
  std::filesystem::path file;
  toml::table root;
  std::map<std::string, Override> overrides;  // by full key name

  std::string file_name() const { return file.string(); }

  // Where a key's value came from: its --set, or file:line of the key.
  std::string location(const std::string& name, const toml::key& key, const toml::node& node) const;

  // The section's table; nullptr when the section is absent or not a table
  // (which the top level reports). "" is the top level.
  const toml::table* table(const std::string& section) const;
};

}  // namespace ptrain::config
