// The `pattern` of a tokenizer.json step (Split, Replace): {"Regex": ...} or
// {"String": ...}, the latter matched literally.
#pragma once

#include "core/tokenizer/json_source.h"
#include "core/tokenizer/unicode_regex.h"

#include <nlohmann/json.hpp>

#include <memory>
#include <string>

namespace ptrain::tokenizer::detail {

// The compiled pattern of `node` (at key `where`); a missing or malformed one
// fails naming the file and `where`.pattern.
std::shared_ptr<UnicodeRegex> step_pattern(const nlohmann::json& node, const std::string& where,
                                           const JsonSource& file);

}  // namespace ptrain::tokenizer::detail
