// TOML config file → validated sdk::ConfigValues per section → typed
// RunConfig. Validation collects every error before throwing so a user fixes
// a config in one pass; each error starts with where the value came from:
// "file:line" for the config file, "--set section.key=value" for an override.
#include "core/config/config_loader.h"

#include "core/config/core_sections.h"
#include "core/config/cross_checks.h"
#include "core/config/key_suggestions.h"
#include "core/config/parsed_config.h"
#include "core/config/section_validator.h"
#include "core/config/toml_values.h"
#include "core/io/read_file.h"
#include "ptrain/sdk/errors.h"

#include <map>

namespace ptrain::config {

using sdk::ConfigError;
using sdk::ConfigSchema;
using sdk::ConfigValue;
using sdk::ConfigValues;

struct ConfigDocument::Impl : ParsedConfig {};

namespace {

// output_dir defaults to runs/<plugin>: "sft" → runs/sft,
// "build/plugins/libptrain_sft.so" → runs/ptrain_sft.
std::string default_output_dir(const std::string& plugin) {
  std::string stem = std::filesystem::path(plugin).stem().string();
  if (std::filesystem::path(plugin).extension() == ".so" && stem.rfind("lib", 0) == 0 && stem.size() > 3) {
    stem = stem.substr(3);
  }
  if (stem.empty()) stem = "run";
  return "runs/" + stem;
}

// Applies one "section.key=value" override to the parsed document.
void apply_override(ParsedConfig& config, const std::string& override_text) {
  const auto usage = [&](const std::string& why) {
    return sdk::UsageError("--set '" + override_text + "': " + why +
                           " (expected section.key=value, e.g. --set optim.lr=1e-5 or --set data.train=train.jsonl)");
  };
  const auto eq = override_text.find('=');
  if (eq == std::string::npos) throw usage("no '='");
  const std::string name = override_text.substr(0, eq);
  const std::string raw = override_text.substr(eq + 1);
  const auto dot = name.find('.');
  const std::string section = dot == std::string::npos ? "" : name.substr(0, dot);
  const std::string key = dot == std::string::npos ? name : name.substr(dot + 1);
  if ((dot != std::string::npos && !is_bare_key(section)) || !is_bare_key(key)) {
    throw usage("'" + name + "' is not a key name (letters, digits, '_' and '-', one optional 'section.')");
  }
  const ConfigValue value = parse_override_value(raw).value_or(ConfigValue(raw));
  toml::table* target = &config.root;
  if (!section.empty()) {
    toml::node* node = config.root.get(section);
    if (!node) {
      config.root.insert_or_assign(section, toml::table{});
      node = config.root.get(section);
    }
    target = node->as_table();
    if (!target) {
      throw ConfigError("--set " + override_text + ": '" + section + "' is " + describe_node(*node) + " at " +
                        config.file_name() + ":" + std::to_string(node->source().begin.line) + ", not a section");
    }
  }
  insert_value(*target, key, value);
  config.overrides[name] = Override{"--set " + override_text, raw};
}

// Tables at the top level that are neither a core section nor [module].
void report_unknown_sections(const ParsedConfig& config, ProblemList& problems) {
  std::vector<std::string> section_names;
  for (const CoreSection& section : core_sections()) {
    if (!section.name.empty()) section_names.push_back(section.name);
  }
  section_names.push_back(kModuleSection);
  for (auto&& [key, node] : config.root) {
    const std::string name(key.str());
    if (!node.is_table() || find_core_section(name) || name == kModuleSection) continue;
    const std::string loc = config.location(name, key, node);
    if (const auto* top = core_sections().front().schema.find(name)) {
      problems.add(loc, "key '" + name + "': expected " + (top->type == sdk::ValueType::kInt ? "an " : "a ") +
                            sdk::value_type_name(top->type) + ", got a table");
    } else {
      const auto match = closest(name, section_names);
      problems.add(loc, "unknown section [" + name + "]" +
                            (match ? " (did you mean [" + *match + "]?)" : " (sections: " + join(section_names, ", ") + ")"));
    }
  }
}

}  // namespace

ConfigDocument::ConfigDocument(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ConfigDocument::ConfigDocument(ConfigDocument&&) noexcept = default;
ConfigDocument& ConfigDocument::operator=(ConfigDocument&&) noexcept = default;
ConfigDocument::~ConfigDocument() = default;

const std::filesystem::path& ConfigDocument::file() const { return impl_->file; }

ConfigDocument ConfigDocument::load(const std::filesystem::path& file, const std::vector<std::string>& overrides) {
  auto impl = std::make_unique<Impl>();
  impl->file = file;
  const std::optional<std::string> text = io::try_read_file(file);
  if (!text) {
    const bool exists = std::filesystem::exists(file);
    throw ConfigError(file.string() + ": cannot read config file (" +
                      (exists ? "permission denied or not a file" : "no such file") + ")");
  }
  try {
    impl->root = toml::parse(*text, file.string());
  } catch (const toml::parse_error& e) {
    const auto& begin = e.source().begin;
    throw ConfigError(file.string() + ":" + std::to_string(begin.line) + ":" + std::to_string(begin.column) + ": " +
                      std::string(e.description()));
  }
  for (const auto& override_text : overrides) apply_override(*impl, override_text);
  return ConfigDocument(std::move(impl));
}

std::string ConfigDocument::plugin() const {
  const toml::node* node = impl_->root.get("plugin");
  if (!node)
    throw ConfigError(impl_->file_name() +
                      ": missing required key 'plugin' (a plugin name such as \"sft\", or a path to its .so)");
  if (!node->is_string()) {
    const auto it = impl_->overrides.find("plugin");
    if (it != impl_->overrides.end()) return it->second.raw;
    throw ConfigError(impl_->file_name() + ":" + std::to_string(node->source().begin.line) +
                      ": key 'plugin': expected a string, got " + describe_node(*node));
  }
  return std::string(node->as_string()->get());
}

RunConfig ConfigDocument::resolve(const ConfigSchema& module_schema) const {
  ProblemList problems(impl_->file_name());
  report_unknown_sections(*impl_, problems);
  SectionValidator validator(*impl_, problems);
  std::map<std::string, ConfigValues> values;
  for (const CoreSection& section : core_sections()) {
    values[section.name] = validator.validate(section.name, section.schema, impl_->table(section.name));
  }
  values[kModuleSection] = validator.validate(kModuleSection, module_schema, impl_->table(kModuleSection));

  const auto* tokenizer = impl_->table("tokenizer");
  const auto* batch = impl_->table("batch");
  WrittenKeys written;
  written.tokenizer_kind = tokenizer && tokenizer->contains("kind");
  written.micro_size_or_tokens = batch && (batch->contains("micro_size") || batch->contains("micro_tokens"));
  check_key_combinations(values, problems, impl_->file_name(), written);

  ConfigValues& top = values[""];
  if (!top.has("output_dir") && top.has("plugin") && !impl_->root.contains("output_dir")) {
    top.set("output_dir", default_output_dir(top.get_string("plugin")), kDefaultLocation, false);
  }
  problems.throw_if_any();

  RunConfig config;
  config.source = impl_->file;
  for (const CoreSection& section : core_sections()) section.read(values[section.name], config);
  config.module = std::move(values[kModuleSection]);
  return config;
}

RunConfig load_run_config(const std::filesystem::path& file, const std::vector<std::string>& overrides,
                          const ConfigSchema& module_schema) {
  return ConfigDocument::load(file, overrides).resolve(module_schema);
}

}  // namespace ptrain::config
