#include "core/tokenizer/tokenizer_config.h"

namespace ptrain::tokenizer::detail {

using nlohmann::json;

namespace {

// tokenizer_config.json writes special tokens as "text" or {"content": "text", ...}.
std::optional<std::string> token_text(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value.at("content").is_string())
    return value.at("content").get<std::string>();
  return std::nullopt;
}

// The template text: a string, or the "default" entry of a list of named templates.
std::string chat_template_text(const json& config) {
  std::string chat_template;
  if (!config.contains("chat_template")) return chat_template;
  const json& value = config.at("chat_template");
  if (value.is_string()) {
    chat_template = value.get<std::string>();
  } else if (value.is_array()) {  // [{"name": "default", "template": ...}, ...]
    for (const json& entry : value) {
      if (entry.is_object() && entry.value("name", "") == "default") chat_template = entry.value("template", "");
    }
  }
  return chat_template;
}

}  // namespace

TokenizerConfig read_tokenizer_config(const json& config, const JsonSource& file,
                                      const std::function<std::optional<int64_t>(const std::string&)>& token_id) {
  TokenizerConfig result;
  if (!config.is_object()) return result;
  const auto resolve = [&](const char* key, std::string* text_out = nullptr) -> int64_t {
    if (!config.contains(key) || config.at(key).is_null()) return -1;
    const auto text = token_text(config.at(key));
    if (!text) {
      file.fail(std::string("tokenizer_config.json key '") + key + "': expected a token string, got " +
                config.at(key).dump());
    }
    if (text_out) *text_out = *text;
    if (const auto id = token_id(*text)) return *id;
    file.fail(std::string("tokenizer_config.json key '") + key + "': token \"" + *text + "\" is not in the vocabulary");
  };
  result.bos = resolve("bos_token", &result.bos_text);
  result.eos = resolve("eos_token", &result.eos_text);
  result.pad = resolve("pad_token");
  result.chat_template = chat_template_text(config);
  return result;
}

}  // namespace ptrain::tokenizer::detail
