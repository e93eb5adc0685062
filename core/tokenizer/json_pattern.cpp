#include "core/tokenizer/json_pattern.h"

namespace ptrain::tokenizer::detail {

std::shared_ptr<UnicodeRegex> step_pattern(const nlohmann::json& node, const std::string& where,
                                           const JsonSource& file) {
  const nlohmann::json& pattern = node.contains("pattern") ? node.at("pattern") : nlohmann::json();
  const auto string_field = [&](const char* key) {
    return pattern.is_object() && pattern.contains(key) && pattern.at(key).is_string();
  };
  std::string regex;
  if (string_field("Regex")) {
    regex = pattern.at("Regex").get<std::string>();
  } else if (string_field("String")) {
    regex = escape_regex_literal(pattern.at("String").get<std::string>());
  } else {
    file.fail("key '" + where + ".pattern': expected {\"Regex\": ...} or {\"String\": ...}");
  }
  return std::make_shared<UnicodeRegex>(regex, file.name + ": " + where);
}

}  // namespace ptrain::tokenizer::detail
