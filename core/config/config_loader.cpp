// TOML → validated sdk::ConfigValues per section → typed RunConfig, and back.
//
// Validation collects every error before throwing so a user fixes a config in
// one pass. Each error starts with where the value came from: "file:line" for
// the config file, "--set section.key=value" for an override.
#include "core/config/config_loader.h"

#include "core/config/core_schema.h"
#include "ptrain/sdk/errors.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <type_traits>
#include <sstream>

namespace ptrain::config {

using sdk::ConfigError;
using sdk::ConfigKey;
using sdk::ConfigSchema;
using sdk::ConfigValue;
using sdk::ConfigValues;
using sdk::ValueType;

namespace {

constexpr const char* kModuleSection = "module";
constexpr const char* kDefaultLocation = "default";

// Keys [model] ignores when `init` is given: the sizes come from config.json.
const std::vector<std::string>& model_size_keys() {
  static const std::vector<std::string> keys = {
      "vocab_size",   "hidden_size", "intermediate_size", "num_layers",          "num_heads",         "num_kv_heads",
      "max_position_embeddings", "rope_theta", "rms_norm_eps", "tie_word_embeddings", "attention_bias"};
  return keys;
}

std::string full_name(const std::string& section, const std::string& key) {
  return section.empty() ? key : section + "." + key;
}

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

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
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

// The closest candidate, if it is close enough to be a typo: at most 2 edits
// (1 for short names, so "lr" does not suggest "eps"), or a prefix of at
// least 3 characters ("optimizer" → "optim").
std::optional<std::string> closest(const std::string& name, const std::vector<std::string>& candidates) {
  const std::string needle = lower(name);
  const size_t limit = std::min<size_t>(2, std::max<size_t>(1, needle.size() / 3));
  std::optional<std::string> best;
  size_t best_distance = limit + 1;
  for (const auto& candidate : candidates) {
    const std::string hay = lower(candidate);
    const size_t distance = edit_distance(needle, hay);
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  if (best) return best;
  for (const auto& candidate : candidates) {
    const std::string hay = lower(candidate);
    const auto& shorter = hay.size() < needle.size() ? hay : needle;
    const auto& longer = hay.size() < needle.size() ? needle : hay;
    if (shorter.size() >= 3 && longer.compare(0, shorter.size(), shorter) == 0) return candidate;
  }
  return std::nullopt;
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

std::vector<std::string> key_names(const ConfigSchema& schema) {
  std::vector<std::string> names;
  for (const auto& key : schema.keys()) names.push_back(key.name);
  return names;
}

std::string join(const std::vector<std::string>& items, const std::string& separator) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? separator : "") + items[i];
  return out;
}

// "(did you mean 'micro_size'?)", "(did you mean 'optim.lr'?)" for a key that
// lives in another section, or the list of keys the section does have.
std::string unknown_key_hint(const std::string& section, const std::string& key, const ConfigSchema& schema) {
  if (auto match = closest(key, key_names(schema))) return " (did you mean '" + *match + "'?)";
  const auto alias = known_aliases().find(lower(key));
  if (alias != known_aliases().end()) {
    const auto& target = alias->second;
    const std::string prefix = section + ".";
    if (!section.empty() && target.compare(0, prefix.size(), prefix) == 0)
      return " (did you mean '" + target.substr(prefix.size()) + "'?)";
    return " (did you mean '" + target + "'?)";
  }
  // The right key in the wrong section, e.g. `lr` at the top level.
  if (section != kModuleSection) {
    for (const auto& [other, other_schema] : core_sections()) {
      if (other != section && !other.empty() && other_schema.find(key)) return " (did you mean '" + other + "." + key + "'?)";
    }
  }
  if (schema.keys().empty()) return " (this section takes no keys)";
  return " (" + std::string(section.empty() ? "top-level keys" : "keys of [" + section + "]") + ": " +
         join(key_names(schema), ", ") + ")";
}

std::string article(ValueType type) { return type == ValueType::kInt ? "an" : "a"; }

// "string \"abc\"", "integer 3", "table" — what the user wrote, for messages.
std::string describe_node(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string: return "string " + sdk::format_config_value(std::string(node.as_string()->get()));
    case toml::node_type::integer: return "integer " + std::to_string(node.as_integer()->get());
    case toml::node_type::floating_point: return "float " + sdk::format_config_value(node.as_floating_point()->get());
    case toml::node_type::boolean: return std::string("bool ") + (node.as_boolean()->get() ? "true" : "false");
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    default: return "nothing";
  }
}

std::string format_bound(ValueType type, double bound) {
  if (type == ValueType::kInt) return std::to_string(static_cast<int64_t>(bound));
  return sdk::format_config_value(bound);
}

// One validation error and where it points, so the list can be sorted into
// file order (toml++ tables iterate by key, not by line).
struct Problem {
  int rank = 0;        // 0: file line, 1: --set, 2: whole file
  int64_t line = 0;
  std::string text;
};

struct Override {
  std::string location;  // "--set optim.lr=1e-5"
  std::string raw;       // the text after '=', used as-is for string keys
};

// Builds RunConfig fields from validated values and writes them back; one
// table serves both directions so they cannot drift apart.
struct Binding {
  std::string section;
  std::string key;
  std::function<void(RunConfig&, const ConfigValue&)> read;
  std::function<ConfigValue(const RunConfig&)> write;
};

template <class Section, class Field>
Binding bind_field(const std::string& section, const std::string& key, Section RunConfig::*member, Field Section::*field) {
  return Binding{section, key,
                 [member, field](RunConfig& config, const ConfigValue& value) {
                   (config.*member).*field = std::get<Field>(value);
                 },
                 [member, field](const RunConfig& config) -> ConfigValue { return (config.*member).*field; }};
}

std::vector<Binding> build_bindings() {
  std::vector<Binding> b;
  b.push_back({"", "plugin", [](RunConfig& c, const ConfigValue& v) { c.plugin = std::get<std::string>(v); },
               [](const RunConfig& c) -> ConfigValue { return c.plugin; }});
  b.push_back({"", "seed", [](RunConfig& c, const ConfigValue& v) { c.seed = static_cast<uint64_t>(std::get<int64_t>(v)); },
               [](const RunConfig& c) -> ConfigValue { return static_cast<int64_t>(c.seed); }});
  b.push_back({"", "output_dir", [](RunConfig& c, const ConfigValue& v) { c.output_dir = std::get<std::string>(v); },
               [](const RunConfig& c) -> ConfigValue { return c.output_dir; }});

  using R = RunConfig;
  b.push_back(bind_field("model", "init", &R::model, &ModelSection::init));
  b.push_back(bind_field("model", "vocab_size", &R::model, &ModelSection::vocab_size));
  b.push_back(bind_field("model", "hidden_size", &R::model, &ModelSection::hidden_size));
  b.push_back(bind_field("model", "intermediate_size", &R::model, &ModelSection::intermediate_size));
  b.push_back(bind_field("model", "num_layers", &R::model, &ModelSection::num_layers));
  b.push_back(bind_field("model", "num_heads", &R::model, &ModelSection::num_heads));
  b.push_back(bind_field("model", "num_kv_heads", &R::model, &ModelSection::num_kv_heads));
  b.push_back(bind_field("model", "max_position_embeddings", &R::model, &ModelSection::max_position_embeddings));
  b.push_back(bind_field("model", "rope_theta", &R::model, &ModelSection::rope_theta));
  b.push_back(bind_field("model", "rms_norm_eps", &R::model, &ModelSection::rms_norm_eps));
  b.push_back(bind_field("model", "tie_word_embeddings", &R::model, &ModelSection::tie_word_embeddings));
  b.push_back(bind_field("model", "attention_bias", &R::model, &ModelSection::attention_bias));
  b.push_back(bind_field("model", "activation_checkpointing", &R::model, &ModelSection::activation_checkpointing));
  b.push_back(bind_field("tokenizer", "kind", &R::tokenizer, &TokenizerSection::kind));
  b.push_back(bind_field("tokenizer", "path", &R::tokenizer, &TokenizerSection::path));
  b.push_back(bind_field("tokenizer", "chat_template", &R::tokenizer, &TokenizerSection::chat_template));
  b.push_back(bind_field("tokenizer", "chat_begin", &R::tokenizer, &TokenizerSection::chat_begin));
  b.push_back(bind_field("tokenizer", "chat_system_prefix", &R::tokenizer, &TokenizerSection::chat_system_prefix));
  b.push_back(bind_field("tokenizer", "chat_system_suffix", &R::tokenizer, &TokenizerSection::chat_system_suffix));
  b.push_back(bind_field("tokenizer", "chat_user_prefix", &R::tokenizer, &TokenizerSection::chat_user_prefix));
  b.push_back(bind_field("tokenizer", "chat_user_suffix", &R::tokenizer, &TokenizerSection::chat_user_suffix));
  b.push_back(bind_field("tokenizer", "chat_assistant_prefix", &R::tokenizer, &TokenizerSection::chat_assistant_prefix));
  b.push_back(bind_field("tokenizer", "chat_assistant_suffix", &R::tokenizer, &TokenizerSection::chat_assistant_suffix));
  b.push_back(bind_field("tokenizer", "chat_turn_separator", &R::tokenizer, &TokenizerSection::chat_turn_separator));
  b.push_back(bind_field("tokenizer", "chat_trim_content", &R::tokenizer, &TokenizerSection::chat_trim_content));
  b.push_back(bind_field("data", "train", &R::data, &DataSection::train));
  b.push_back(bind_field("data", "max_length", &R::data, &DataSection::max_length));
  b.push_back(bind_field("data", "on_error", &R::data, &DataSection::on_error));
  b.push_back(bind_field("batch", "global_size", &R::batch, &BatchSection::global_size));
  b.push_back(bind_field("batch", "micro_size", &R::batch, &BatchSection::micro_size));
  b.push_back(bind_field("batch", "micro_tokens", &R::batch, &BatchSection::micro_tokens));
  b.push_back(bind_field("batch", "group_by_length", &R::batch, &BatchSection::group_by_length));
  b.push_back(bind_field("batch", "packing", &R::batch, &BatchSection::packing));
  b.push_back(bind_field("optim", "name", &R::optim, &OptimSection::name));
  b.push_back(bind_field("optim", "lr", &R::optim, &OptimSection::lr));
  b.push_back(bind_field("optim", "weight_decay", &R::optim, &OptimSection::weight_decay));
  b.push_back(bind_field("optim", "beta1", &R::optim, &OptimSection::beta1));
  b.push_back(bind_field("optim", "beta2", &R::optim, &OptimSection::beta2));
  b.push_back(bind_field("optim", "eps", &R::optim, &OptimSection::eps));
  b.push_back(bind_field("optim", "momentum", &R::optim, &OptimSection::momentum));
  b.push_back(bind_field("optim", "clip_grad_norm", &R::optim, &OptimSection::clip_grad_norm));
  b.push_back(bind_field("optim", "decay_norms_and_biases", &R::optim, &OptimSection::decay_norms_and_biases));
  b.push_back(bind_field("schedule", "name", &R::schedule, &ScheduleSection::name));
  b.push_back(bind_field("schedule", "warmup_steps", &R::schedule, &ScheduleSection::warmup_steps));
  b.push_back(bind_field("schedule", "min_lr_ratio", &R::schedule, &ScheduleSection::min_lr_ratio));
  b.push_back(bind_field("train", "max_steps", &R::train, &TrainSection::max_steps));
  b.push_back(bind_field("train", "log_every", &R::train, &TrainSection::log_every));
  b.push_back(bind_field("train", "max_consecutive_skips", &R::train, &TrainSection::max_consecutive_skips));
  b.push_back(bind_field("train", "loss_spike_factor", &R::train, &TrainSection::loss_spike_factor));
  b.push_back(bind_field("logging", "tensorboard", &R::logging, &LoggingSection::tensorboard));
  b.push_back(bind_field("checkpoint", "every_steps", &R::checkpoint, &CheckpointSection::every_steps));
  b.push_back(bind_field("checkpoint", "keep_last", &R::checkpoint, &CheckpointSection::keep_last));
  b.push_back(bind_field("distributed", "timeout_s", &R::distributed, &DistributedSection::timeout_s));
  b.push_back(bind_field("distributed", "bucket_mb", &R::distributed, &DistributedSection::bucket_mb));
  b.push_back(bind_field("runtime", "threads", &R::runtime, &RuntimeSection::threads));

  // A schema key without a binding would be validated and then dropped; a
  // binding without a schema key could never be set. Either is a core bug.
  std::set<std::string> bound;
  for (const auto& binding : b) bound.insert(full_name(binding.section, binding.key));
  std::set<std::string> declared;
  for (const auto& [section, schema] : core_sections()) {
    for (const auto& key : schema.keys()) declared.insert(full_name(section, key.name));
  }
  if (bound != declared) throw std::logic_error("config_loader: core schema and RunConfig bindings disagree");
  return b;
}

const std::vector<Binding>& bindings() {
  static const auto table = build_bindings();
  return table;
}

// An array of strings or of numbers as a list value; nullopt for other arrays
// (mixed, nested). An empty array is an empty list of either type.
std::optional<ConfigValue> array_value(const toml::array& array) {
  if (array.empty() || array.is_homogeneous(toml::node_type::string)) {
    std::vector<std::string> strings;
    for (const toml::node& item : array) strings.emplace_back(item.as_string()->get());
    return ConfigValue(std::move(strings));
  }
  std::vector<double> numbers;
  for (const toml::node& item : array) {
    if (const auto* integer = item.as_integer()) {
      numbers.push_back(static_cast<double>(integer->get()));
    } else if (const auto* floating = item.as_floating_point()) {
      numbers.push_back(floating->get());
    } else {
      return std::nullopt;
    }
  }
  return ConfigValue(std::move(numbers));
}

// Parses the value of a --set override as TOML; nullopt if it is not a single
// scalar TOML value (then the caller takes the text as a string).
std::optional<ConfigValue> parse_override_value(const std::string& text) {
  try {
    toml::table parsed = toml::parse("v = " + text);
    if (parsed.size() != 1) return std::nullopt;
    const toml::node* node = parsed.get("v");
    if (!node) return std::nullopt;
    switch (node->type()) {
      case toml::node_type::boolean: return ConfigValue(node->as_boolean()->get());
      case toml::node_type::integer: return ConfigValue(node->as_integer()->get());
      case toml::node_type::floating_point: return ConfigValue(node->as_floating_point()->get());
      case toml::node_type::string: return ConfigValue(std::string(node->as_string()->get()));
      case toml::node_type::array: return array_value(*node->as_array());
      default: return std::nullopt;
    }
  } catch (const toml::parse_error&) {
    return std::nullopt;
  }
}

bool is_bare_key(const std::string& key) {
  if (key.empty()) return false;
  return std::all_of(key.begin(), key.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; });
}

void insert_scalar(toml::table& table, const std::string& key, const ConfigValue& value) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::vector<std::string>> || std::is_same_v<T, std::vector<double>>) {
          toml::array array;
          for (const auto& item : v) array.push_back(item);
          table.insert_or_assign(key, std::move(array));
        } else {
          table.insert_or_assign(key, v);
        }
      },
      value);
}

}  // namespace

// The parsed document; a named (not anonymous) namespace because
// ConfigDocument::Impl, which has external linkage, derives from it.
namespace loader_detail {

struct DocumentData {
  std::filesystem::path file;
  toml::table root;
  std::map<std::string, Override> overrides;  // by full key name

  std::string file_name() const { return file.string(); }

  // Where a key's value came from: its --set, or file:line of the key.
  std::string location(const std::string& name, const toml::key& key, const toml::node& node) const {
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
};

}  // namespace loader_detail

struct ConfigDocument::Impl : loader_detail::DocumentData {};

namespace {

// Accumulates errors and the validated values while resolving.
class Resolver {
 public:
  explicit Resolver(const loader_detail::DocumentData& doc) : doc_(doc) {}

  void add_problem(const std::string& location, const std::string& message) {
    Problem problem;
    problem.text = location.empty() ? message : location + ": " + message;
    const std::string prefix = doc_.file_name() + ":";
    if (location.rfind("--set ", 0) == 0) {
      problem.rank = 1;
    } else if (location.size() > prefix.size() && location.compare(0, prefix.size(), prefix) == 0) {
      problem.rank = 0;
      problem.line = std::strtoll(location.c_str() + prefix.size(), nullptr, 10);
    } else {
      problem.rank = 2;
    }
    problems_.push_back(std::move(problem));
  }

  // Validates one section's table (nullptr: the section is absent) and
  // returns its values with defaults applied.
  ConfigValues validate_section(const std::string& section, const ConfigSchema& schema, const toml::table* table) {
    ConfigValues values(section);
    std::set<std::string> seen;  // present in the file, valid or not: neither defaulted nor "missing"
    if (table) {
      for (auto&& [key, node] : *table) {
        const std::string key_name(key.str());
        const std::string name = full_name(section, key_name);
        const std::string loc = doc_.location(name, key, node);
        // At the top level, tables are sections and are handled by the caller.
        if (section.empty() && node.is_table()) continue;
        const ConfigKey* spec = schema.find(key_name);
        if (!spec) {
          if (section.empty() && (find_core_section(key_name) || key_name == kModuleSection)) {
            add_problem(loc, "'" + key_name + "' is a section; write it as [" + key_name + "], got " + describe_node(node));
          } else {
            add_problem(loc, "unknown key '" + name + "'" + unknown_key_hint(section, key_name, schema));
          }
          continue;
        }
        seen.insert(key_name);
        if (auto value = convert(*spec, name, loc, node)) values.set(key_name, std::move(*value), loc, true);
      }
    }
    for (const auto& spec : schema.keys()) {
      if (seen.count(spec.name)) continue;
      if (spec.required) {
        add_problem(doc_.file_name(), "missing required key '" + full_name(section, spec.name) + "' (" + spec.doc + ")");
      } else if (spec.default_value) {
        values.set(spec.name, *spec.default_value, kDefaultLocation, false);
      }
    }
    return values;
  }

  std::vector<Problem>& problems() { return problems_; }

 private:
  // The value of `node` as the key's type, after type, range and choice
  // checks; nullopt (and a recorded problem) if it fails one.
  std::optional<ConfigValue> convert(const ConfigKey& spec, const std::string& name, const std::string& loc,
                                     const toml::node& node) {
    if (spec.type == ValueType::kStringList || spec.type == ValueType::kFloatList) {
      return convert_list(spec, name, loc, node);
    }
    std::optional<ConfigValue> value;
    switch (spec.type) {
      case ValueType::kBool:
        if (node.is_boolean()) value = node.as_boolean()->get();
        break;
      case ValueType::kInt:
        if (node.is_integer()) value = node.as_integer()->get();
        break;
      case ValueType::kFloat:
        // An integer is a float the user wrote without a '.', e.g. lr = 1.
        if (node.is_floating_point()) value = node.as_floating_point()->get();
        if (node.is_integer()) value = static_cast<double>(node.as_integer()->get());
        break;
      case ValueType::kString:
        if (node.is_string()) {
          value = std::string(node.as_string()->get());
        } else if (const auto it = doc_.overrides.find(name); it != doc_.overrides.end()) {
          value = it->second.raw;  // --set output_dir=2024 means the string "2024"
        }
        break;
      case ValueType::kStringList:
      case ValueType::kFloatList: break;  // convert_list
    }
    const std::string prefix = "key '" + name + "'";
    if (!value) {
      add_problem(loc, prefix + ": expected " + article(spec.type) + " " + sdk::value_type_name(spec.type) + ", got " +
                           describe_node(node));
      return std::nullopt;
    }
    if (spec.type == ValueType::kInt || spec.type == ValueType::kFloat) {
      const double number = spec.type == ValueType::kInt ? static_cast<double>(std::get<int64_t>(*value))
                                                         : std::get<double>(*value);
      const std::string shown = sdk::format_config_value(*value);
      if (!std::isfinite(number)) {
        add_problem(loc, prefix + ": must be a finite number, got " + shown);
        return std::nullopt;
      }
      if (spec.min && number < *spec.min) {
        add_problem(loc, prefix + ": must be >= " + format_bound(spec.type, *spec.min) + ", got " + shown);
        return std::nullopt;
      }
      if (spec.max && number > *spec.max) {
        add_problem(loc, prefix + ": must be <= " + format_bound(spec.type, *spec.max) + ", got " + shown);
        return std::nullopt;
      }
    }
    if (spec.type == ValueType::kString && !spec.choices.empty()) {
      const auto& text = std::get<std::string>(*value);
      if (std::find(spec.choices.begin(), spec.choices.end(), text) == spec.choices.end()) {
        std::vector<std::string> quoted;
        for (const auto& choice : spec.choices) quoted.push_back(sdk::format_config_value(choice));
        std::string message = prefix + ": expected one of " + join(quoted, ", ") + ", got " + sdk::format_config_value(text);
        if (auto match = closest(text, spec.choices)) message += " (did you mean \"" + *match + "\"?)";
        add_problem(loc, message);
        return std::nullopt;
      }
    }
    return value;
  }

  // A TOML array whose elements each pass the element type's checks (an
  // error names the element: key 'module.loss[1]', at the element's line). A
  // single value of the element type is a one-element list, so
  // `loss = "sigmoid"` and `--set module.loss=ipo` work.
  std::optional<ConfigValue> convert_list(const ConfigKey& spec, const std::string& name, const std::string& loc,
                                          const toml::node& node) {
    const bool strings = spec.type == ValueType::kStringList;
    ConfigKey element = spec;
    element.type = strings ? ValueType::kString : ValueType::kFloat;
    const toml::array* array = node.as_array();
    if (!array) {
      const bool scalar = strings ? node.is_string() || doc_.overrides.count(name) != 0 : node.is_number();
      if (!scalar) {
        add_problem(loc, "key '" + name + "': expected a " + sdk::value_type_name(spec.type) + " (a TOML array like " +
                             (strings ? "[\"a\", \"b\"]" : "[1.0, 0.5]") + "), got " + describe_node(node));
        return std::nullopt;
      }
      std::optional<ConfigValue> value = convert(element, name, loc, node);
      if (!value) return std::nullopt;
      if (strings) return ConfigValue(std::vector<std::string>{std::get<std::string>(*value)});
      return ConfigValue(std::vector<double>{std::get<double>(*value)});
    }
    std::vector<std::string> string_items;
    std::vector<double> number_items;
    bool valid = true;
    for (size_t i = 0; i < array->size(); ++i) {
      const toml::node& item = *array->get(i);
      const auto line = item.source().begin.line;
      const std::string item_loc =
          line > 0 && doc_.overrides.count(name) == 0 ? doc_.file_name() + ":" + std::to_string(line) : loc;
      std::optional<ConfigValue> value = convert(element, name + "[" + std::to_string(i) + "]", item_loc, item);
      if (!value) {
        valid = false;
      } else if (strings) {
        string_items.push_back(std::get<std::string>(*value));
      } else {
        number_items.push_back(std::get<double>(*value));
      }
    }
    if (!valid) return std::nullopt;
    return strings ? ConfigValue(std::move(string_items)) : ConfigValue(std::move(number_items));
  }

  const loader_detail::DocumentData& doc_;
  std::vector<Problem> problems_;
};

// Cross-key rules over the validated sections. Keys that failed validation
// are absent, so every rule first checks has() and stays quiet about them.
class CrossChecks {
 public:
  // `tokenizer_kind_written` / `micro_written`: the file or a --set wrote
  // those keys, even if their values were invalid (and so are absent), in
  // which case nothing is inferred for them.
  CrossChecks(std::map<std::string, ConfigValues>& values, Resolver& resolver, const std::string& file,
              bool tokenizer_kind_written, bool micro_written)
      : v_(values),
        resolver_(resolver),
        file_(file),
        tokenizer_kind_written_(tokenizer_kind_written),
        micro_written_(micro_written) {}

  void run() {
    check_model();
    check_tokenizer();
    check_batch();
    check_optim();
    check_schedule_and_train();
  }

 private:
  ConfigValues& sec(const std::string& name) { return v_[name]; }
  bool has(const std::string& s, const std::string& k) { return sec(s).has(k); }
  bool user(const std::string& s, const std::string& k) { return sec(s).set_by_user(k); }
  int64_t i(const std::string& s, const std::string& k) { return sec(s).get_int(k); }
  double f(const std::string& s, const std::string& k) { return sec(s).get_float(k); }
  const std::string& str(const std::string& s, const std::string& k) { return sec(s).get_string(k); }

  std::string location(const std::string& s, const std::string& k) {
    const auto& entries = sec(s).entries();
    const auto it = entries.find(k);
    return it == entries.end() ? std::string() : it->second.location;
  }

  // "'model.num_heads' = 3 (x.toml:7)" or "... (default)".
  std::string describe(const std::string& s, const std::string& k) {
    const auto& entry = sec(s).entries().at(k);
    return "'" + full_name(s, k) + "' = " + sdk::format_config_value(entry.value) + " (" + entry.location + ")";
  }

  // A rule about two keys is reported at whichever of them the user wrote.
  void report(const std::string& s1, const std::string& k1, const std::string& s2, const std::string& k2,
              const std::string& message) {
    std::string loc = file_;
    if (user(s1, k1)) {
      loc = location(s1, k1);
    } else if (user(s2, k2)) {
      loc = location(s2, k2);
    }
    resolver_.add_problem(loc, message);
  }

  void require_positive(const std::string& s, const std::string& k) {
    if (has(s, k) && !(f(s, k) > 0.0))
      resolver_.add_problem(location(s, k), "key '" + full_name(s, k) + "': must be > 0, got " +
                                                sdk::format_config_value(f(s, k)));
  }

  void require_below_one(const std::string& s, const std::string& k) {
    if (has(s, k) && !(f(s, k) < 1.0))
      resolver_.add_problem(location(s, k), "key '" + full_name(s, k) + "': must be < 1, got " +
                                                sdk::format_config_value(f(s, k)));
  }

  // A key the chosen option ignores would be a silent no-op; reject it.
  // Its default value is allowed, so a resolved config (which lists every
  // key) loads again.
  void reject_unused(const std::string& s, const std::string& k, const std::string& s_option,
                     const std::string& k_option, const std::string& applies_to) {
    // A key that failed its own checks has no entry (its problem is already recorded).
    if (!user(s, k)) return;
    const ConfigKey* spec = find_core_section(s) ? find_core_section(s)->find(k) : nullptr;
    const bool is_default = spec && spec->default_value && sec(s).entries().at(k).value == *spec->default_value;
    if (!is_default)
      resolver_.add_problem(location(s, k), "key '" + full_name(s, k) + "' only applies to " + applies_to + ", but " +
                                                describe(s_option, k_option) + "; remove it");
  }

  void check_model() {
    if (has("model", "init")) {
      std::vector<std::string> conflicting;
      for (const auto& k : model_size_keys()) {
        if (user("model", k)) conflicting.push_back("'model." + k + "' (" + location("model", k) + ")");
      }
      if (!conflicting.empty()) {
        resolver_.add_problem(location("model", "init"),
                              "key 'model.init' cannot be combined with " + join(conflicting, ", ") +
                                  ": the sizes come from " + str("model", "init") +
                                  "/config.json; remove the size keys or remove init");
      }
      // The defaulted sizes do not describe the model; drop them so nothing
      // reads them and to_toml does not write them.
      ConfigValues kept("model");
      for (const auto& [k, entry] : sec("model").entries()) {
        const auto& sizes = model_size_keys();
        if (std::find(sizes.begin(), sizes.end(), k) == sizes.end()) kept.set(k, entry.value, entry.location, entry.set_by_user);
      }
      sec("model") = std::move(kept);
      return;
    }
    require_positive("model", "rope_theta");
    require_positive("model", "rms_norm_eps");
    if (has("model", "hidden_size") && has("model", "num_heads")) {
      const int64_t hidden = i("model", "hidden_size"), heads = i("model", "num_heads");
      if (hidden % heads != 0) {
        report("model", "hidden_size", "model", "num_heads",
               describe("model", "hidden_size") + " is not divisible by " + describe("model", "num_heads"));
      } else if ((hidden / heads) % 2 != 0) {
        report("model", "hidden_size", "model", "num_heads",
               "head dimension " + describe("model", "hidden_size") + " / " + describe("model", "num_heads") + " = " +
                   std::to_string(hidden / heads) + " must be even for rotary embeddings");
      }
    }
    if (has("model", "num_heads") && has("model", "num_kv_heads") && i("model", "num_heads") % i("model", "num_kv_heads") != 0) {
      report("model", "num_kv_heads", "model", "num_heads",
             describe("model", "num_heads") + " is not divisible by " + describe("model", "num_kv_heads") +
                 " (grouped-query attention shares each key/value head among num_heads / num_kv_heads query heads)");
    }
    if (has("data", "max_length") && has("model", "max_position_embeddings") &&
        i("data", "max_length") > i("model", "max_position_embeddings")) {
      report("data", "max_length", "model", "max_position_embeddings",
             describe("data", "max_length") + " exceeds " + describe("model", "max_position_embeddings") +
                 "; shorten sequences or build a longer model");
    }
  }

  void check_tokenizer() {
    const bool path = has("tokenizer", "path");
    if (!has("tokenizer", "kind")) {
      // A kind with a bad choice is absent here too; it must not be replaced by a guess.
      if (!tokenizer_kind_written_) {
        sec("tokenizer").set("kind", std::string(path ? "hf" : "bytes"), kDefaultLocation, false);
      }
    } else if (str("tokenizer", "kind") == "hf" && !path) {
      resolver_.add_problem(location("tokenizer", "kind"),
                            "key 'tokenizer.kind' = \"hf\" needs 'tokenizer.path' (the tokenizer.json to load)");
    } else if (str("tokenizer", "kind") == "bytes" && path) {
      resolver_.add_problem(location("tokenizer", "path"),
                            "key 'tokenizer.path' is ignored by " + describe("tokenizer", "kind") +
                                "; remove path or set kind = \"hf\"");
    }
    // The chat_* keys describe a custom template; with a named one they would be ignored.
    if (has("tokenizer", "chat_template")) {
      const bool custom = str("tokenizer", "chat_template") == "custom";
      for (const char* k : {"chat_begin", "chat_system_prefix", "chat_system_suffix", "chat_user_prefix",
                            "chat_user_suffix", "chat_assistant_prefix", "chat_assistant_suffix",
                            "chat_turn_separator", "chat_trim_content"}) {
        if (!custom) reject_unused("tokenizer", k, "tokenizer", "chat_template", "tokenizer.chat_template = \"custom\"");
      }
      for (const char* k : {"chat_user_prefix", "chat_assistant_prefix", "chat_assistant_suffix"}) {
        if (custom && !has("tokenizer", k)) {
          resolver_.add_problem(location("tokenizer", "chat_template"),
                                std::string("key 'tokenizer.chat_template' = \"custom\" needs 'tokenizer.") + k +
                                    "' (a custom template needs user and assistant prefixes and the assistant "
                                    "end-of-turn text)");
        }
      }
    }
    // Ids 0-255 are bytes and 256-258 are <bos>, <eos>, <pad> (DESIGN.md §6).
    if (has("tokenizer", "kind") && str("tokenizer", "kind") == "bytes" && !has("model", "init") &&
        has("model", "vocab_size") && i("model", "vocab_size") < 259) {
      report("model", "vocab_size", "tokenizer", "kind",
             describe("model", "vocab_size") + " is too small for " + describe("tokenizer", "kind") +
                 ", which needs >= 259 ids (256 bytes + bos, eos, pad)");
    }
  }

  void check_batch() {
    const bool size = has("batch", "micro_size"), tokens = has("batch", "micro_tokens");
    if (size && tokens) {
      report("batch", "micro_tokens", "batch", "micro_size",
             "keys " + describe("batch", "micro_size") + " and " + describe("batch", "micro_tokens") +
                 " are both set; a microbatch is sized by examples or by tokens, choose one");
    } else if (!size && !tokens && has("batch", "global_size") && !micro_written_) {
      // Neither given: one microbatch per update, i.e. no gradient accumulation.
      sec("batch").set("micro_size", i("batch", "global_size"), kDefaultLocation, false);
    }
    if (has("batch", "packing") && sec("batch").get_bool("packing") && !tokens) {
      report("batch", "packing", "batch", "micro_tokens",
             describe("batch", "packing") +
                 " needs batch.micro_tokens: packed rows are cut into microbatches by "
                 "their token count");
    }
    if (tokens && has("data", "max_length") && i("batch", "micro_tokens") < i("data", "max_length")) {
      report("batch", "micro_tokens", "data", "max_length",
             describe("batch", "micro_tokens") + " is smaller than " + describe("data", "max_length") +
                 "; a microbatch must hold at least one full-length sequence");
    }
  }

  void check_optim() {
    require_positive("optim", "lr");
    require_positive("optim", "eps");
    require_below_one("optim", "beta1");
    require_below_one("optim", "beta2");
    require_below_one("optim", "momentum");
    if (!has("optim", "name")) return;
    if (str("optim", "name") == "adamw") {
      reject_unused("optim", "momentum", "optim", "name", "optim.name = \"sgd\"");
    } else if (str("optim", "name") == "sgd") {
      for (const char* k : {"beta1", "beta2", "eps"}) reject_unused("optim", k, "optim", "name", "optim.name = \"adamw\"");
    }
  }

  void check_schedule_and_train() {
    if (has("schedule", "name") && str("schedule", "name") == "constant")
      reject_unused("schedule", "min_lr_ratio", "schedule", "name", "schedule.name = \"linear\" or \"cosine\"");
    if (!has("train", "max_steps")) return;
    const int64_t max_steps = i("train", "max_steps");
    if (has("schedule", "warmup_steps") && i("schedule", "warmup_steps") > max_steps) {
      report("schedule", "warmup_steps", "train", "max_steps",
             describe("schedule", "warmup_steps") + " exceeds " + describe("train", "max_steps") +
                 "; the learning rate would never reach optim.lr");
    }
    // log_every > max_steps is fine: the last step is always logged.
  }

 private:
  std::map<std::string, ConfigValues>& v_;
  Resolver& resolver_;
  std::string file_;
  bool tokenizer_kind_written_;
  bool micro_written_;
};

std::string summarize(const std::string& file, std::vector<Problem> problems) {
  std::stable_sort(problems.begin(), problems.end(), [](const Problem& a, const Problem& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.line < b.line;
  });
  if (problems.size() == 1) return problems.front().text;
  std::string text = file + ": " + std::to_string(problems.size()) + " config errors:";
  for (const auto& problem : problems) text += "\n  " + problem.text;
  return text;
}

// output_dir defaults to runs/<plugin>: "sft" → runs/sft,
// "build/plugins/libptrain_sft.so" → runs/ptrain_sft.
std::string default_output_dir(const std::string& plugin) {
  std::string stem = std::filesystem::path(plugin).stem().string();
  if (std::filesystem::path(plugin).extension() == ".so" && stem.rfind("lib", 0) == 0 && stem.size() > 3) stem = stem.substr(3);
  if (stem.empty()) stem = "run";
  return "runs/" + stem;
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

  std::ifstream in(file, std::ios::binary);
  if (!in) {
    const bool exists = std::filesystem::exists(file);
    throw ConfigError(file.string() + ": cannot read config file (" + (exists ? "permission denied or not a file" : "no such file") +
                      ")");
  }
  std::ostringstream text;
  text << in.rdbuf();
  try {
    impl->root = toml::parse(text.str(), file.string());
  } catch (const toml::parse_error& e) {
    const auto& begin = e.source().begin;
    throw ConfigError(file.string() + ":" + std::to_string(begin.line) + ":" + std::to_string(begin.column) + ": " +
                      std::string(e.description()));
  }

  for (const auto& override_text : overrides) {
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
    if ((dot != std::string::npos && !is_bare_key(section)) || !is_bare_key(key))
      throw usage("'" + name + "' is not a key name (letters, digits, '_' and '-', one optional 'section.')");

    const ConfigValue value = parse_override_value(raw).value_or(ConfigValue(raw));
    toml::table* target = &impl->root;
    if (!section.empty()) {
      toml::node* node = impl->root.get(section);
      if (!node) {
        impl->root.insert_or_assign(section, toml::table{});
        node = impl->root.get(section);
      }
      target = node->as_table();
      if (!target)
        throw ConfigError("--set " + override_text + ": '" + section + "' is " + describe_node(*node) + " at " +
                          file.string() + ":" + std::to_string(node->source().begin.line) + ", not a section");
    }
    insert_scalar(*target, key, value);
    impl->overrides[name] = Override{"--set " + override_text, raw};
  }
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
  const auto& table_bindings = bindings();  // checks schema ↔ RunConfig agreement first
  Resolver resolver(*impl_);
  std::map<std::string, ConfigValues> values;

  // Sections in the file that are not core sections or [module].
  std::vector<std::string> section_names;
  for (const auto& [name, schema] : core_sections()) {
    if (!name.empty()) section_names.push_back(name);
  }
  section_names.push_back(kModuleSection);
  for (auto&& [key, node] : impl_->root) {
    const std::string name(key.str());
    if (!node.is_table() || find_core_section(name) || name == kModuleSection) continue;
    const auto* top = core_sections().front().second.find(name);
    const std::string loc = impl_->location(name, key, node);
    if (top) {
      resolver.add_problem(loc, "key '" + name + "': expected " + article(top->type) + " " +
                                    sdk::value_type_name(top->type) + ", got a table");
    } else {
      auto match = closest(name, section_names);
      resolver.add_problem(loc, "unknown section [" + name + "]" +
                                    (match ? " (did you mean [" + *match + "]?)"
                                           : " (sections: " + join(section_names, ", ") + ")"));
    }
  }

  const auto table_of = [&](const std::string& name) -> const toml::table* {
    if (name.empty()) return &impl_->root;
    const toml::node* node = impl_->root.get(name);
    return node ? node->as_table() : nullptr;  // a non-table is reported at the top level
  };
  for (const auto& [name, schema] : core_sections()) values[name] = resolver.validate_section(name, schema, table_of(name));
  values[kModuleSection] = resolver.validate_section(kModuleSection, module_schema, table_of(kModuleSection));

  const auto* tokenizer_table = table_of("tokenizer");
  const auto* batch_table = table_of("batch");
  CrossChecks(values, resolver, impl_->file_name(), tokenizer_table && tokenizer_table->contains("kind"),
              batch_table && (batch_table->contains("micro_size") || batch_table->contains("micro_tokens")))
      .run();

  ConfigValues& top = values[""];
  if (!top.has("output_dir") && top.has("plugin") && !impl_->root.contains("output_dir")) {
    top.set("output_dir", default_output_dir(top.get_string("plugin")), kDefaultLocation, false);
  }

  if (!resolver.problems().empty()) throw ConfigError(summarize(impl_->file_name(), resolver.problems()));

  RunConfig config;
  config.source = impl_->file;
  for (const auto& binding : table_bindings) {
    const auto& section = values[binding.section];
    if (section.has(binding.key)) binding.read(config, section.entries().at(binding.key).value);
  }
  config.module = std::move(values[kModuleSection]);
  return config;
}

RunConfig load_run_config(const std::filesystem::path& file, const std::vector<std::string>& overrides,
                          const ConfigSchema& module_schema) {
  return ConfigDocument::load(file, overrides).resolve(module_schema);
}

namespace {

void write_key(std::ostringstream& out, const std::string& key, const ConfigValue& value, const std::string& doc) {
  std::string line = key + " = " + sdk::format_config_value(value);
  if (!doc.empty()) {
    if (line.size() < 32) line.resize(32, ' ');
    line += "  # " + doc;
  }
  out << line << "\n";
}

}  // namespace

std::string to_toml(const RunConfig& config, const ConfigSchema& module_schema) {
  std::ostringstream out;
  out << "# Resolved by ptrain from " << config.source.string() << ": every key with its value, defaults included.\n"
      << "# Loading this file again gives the same run configuration.\n";

  for (const auto& [section, schema] : core_sections()) {
    out << "\n";
    if (!section.empty()) out << "[" << section << "]\n";
    for (const auto& spec : schema.keys()) {
      // Compared through a plain reference: clang 14 cannot capture a structured binding.
      const std::string& section_name = section;
      const auto binding = std::find_if(bindings().begin(), bindings().end(), [&](const Binding& b) {
        return b.section == section_name && b.key == spec.name;
      });
      if (binding == bindings().end()) continue;
      const ConfigValue value = binding->write(config);
      // Optional keys without a default are unset when empty or 0 (all of
      // them have min >= 1 or are paths), so they are left out.
      if (!spec.default_value) {
        if (const auto* s = std::get_if<std::string>(&value); s && s->empty()) continue;
        if (const auto* n = std::get_if<int64_t>(&value); n && *n == 0) continue;
      }
      if (section == "model" && !config.model.init.empty()) {
        const auto& sizes = model_size_keys();
        if (std::find(sizes.begin(), sizes.end(), spec.name) != sizes.end()) continue;
      }
      write_key(out, spec.name, value, spec.doc);
    }
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
