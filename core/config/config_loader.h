// TOML config file → validated RunConfig, and back to TOML.
//
// Loading happens in two steps because the [module] schema belongs to the
// plugin, and which plugin to load is itself a config key:
//
//   auto doc = ConfigDocument::load(path, overrides);   // parse + --set
//   auto plugin = load_plugin(doc.plugin());             // elsewhere
//   RunConfig config = doc.resolve(plugin.module_schema());
//
// This is the only code that reads TOML; TOML++ stays out of this header.
#pragma once

#include "core/config/run_config.h"
#include "ptrain/sdk/config_schema.h"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace ptrain::config {

class ConfigDocument {
 public:
  // Parses `file` and applies command-line overrides "section.key=value" (or
  // "key=value" for a top-level key), in order. The value is parsed as a TOML
  // value (1e-5 → float, 3 → integer, true → bool, "x" → string); text that is
  // not a TOML value is taken as a string, so --set data.train=foo.jsonl works.
  // Throws sdk::UsageError for a malformed override ("novalue"), and
  // sdk::ConfigError "file:line:col: <reason>" for a TOML syntax error or
  // naming the file if it cannot be read.
  static ConfigDocument load(const std::filesystem::path& file, const std::vector<std::string>& overrides);

  ConfigDocument(ConfigDocument&&) noexcept;
  ConfigDocument& operator=(ConfigDocument&&) noexcept;
  ~ConfigDocument();

  const std::filesystem::path& file() const;

  // The top-level `plugin` key; sdk::ConfigError naming the file if it is
  // missing or not a string.
  std::string plugin() const;

  // Validates every core section against core_sections(), [module] against
  // `module_schema`, and the cross-key rules; fills the typed RunConfig.
  // Collects all errors: throws one sdk::ConfigError whose first line is a
  // summary and each further line one error, or just the error if only one.
  RunConfig resolve(const sdk::ConfigSchema& module_schema) const;

 private:
  struct Impl;
  explicit ConfigDocument(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// load + resolve, for callers that already know the module schema.
RunConfig load_run_config(const std::filesystem::path& file, const std::vector<std::string>& overrides,
                          const sdk::ConfigSchema& module_schema);

// The resolved config as TOML: every key with its value, defaults included,
// each with its doc as a comment, under a header naming the source file.
// Written by the trainer to <output_dir>/config.toml; loading it again (with
// the same module schema) gives an equal RunConfig. Keys of [module] follow
// `module_schema` order (with docs); keys it does not declare follow, sorted.
// Optional keys without a value (model.init, tokenizer.path, ...) are left out.
std::string to_toml(const RunConfig& config, const sdk::ConfigSchema& module_schema = sdk::ConfigSchema());

}  // namespace ptrain::config
