// tokenizer_config.json, read beside tokenizer.json: the bos, eos and pad
// tokens, and the model's Jinja chat_template.
#pragma once

#include "core/tokenizer/json_source.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace ptrain::tokenizer::detail {

struct TokenizerConfig {
  int64_t bos = -1, eos = -1, pad = -1;  // -1: not given
  std::string bos_text, eos_text;        // the tokens' text; empty when not given
  std::string chat_template;             // the Jinja source; empty when not given
};

// `config` may be null (no file). `token_id` maps a token's text to its id;
// a special token it does not know is an error naming the key.
TokenizerConfig read_tokenizer_config(const nlohmann::json& config, const JsonSource& file,
                                      const std::function<std::optional<int64_t>(const std::string&)>& token_id);

}  // namespace ptrain::tokenizer::detail
