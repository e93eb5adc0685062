// The model's own chat template (tokenizer_config.json's Jinja
// chat_template) as an sdk::ChatTemplate, for tokenizer.chat_template = "auto".
//
// Rendering is transformers' apply_chat_template: the template sees
// `messages`, `add_generation_prompt`, `bos_token`, `eos_token` and
// `tools` = none. The assistant-only loss mask comes from the rendering:
//   - a template with {% generation %} blocks trains exactly their output
//     (transformers' return_assistant_tokens_mask);
//   - otherwise assistant message k's trained text starts where the whole
//     rendering leaves the rendering of messages[:k] with the generation
//     prompt (what the model is asked to continue), and ends where the
//     template's loop over the messages leaves message k, less trailing
//     whitespace: the turn separator after the end-of-turn token, which the
//     model never emits because generation stops at that token.
// So think blocks, trimmed content and end-of-turn markers are trained
// exactly as the template writes them.
#pragma once

#include "ptrain/sdk/chat.h"

#include <string>

namespace ptrain::tokenizer {

struct JinjaChatTemplateSource {
  std::string source;     // the Jinja text
  std::string bos_token;  // empty: the tokenizer has none (the template sees it undefined)
  std::string eos_token;
  std::string origin;  // for errors: "models/x/tokenizer_config.json"
};

// Parses the template now, so that a run with a template the engine cannot
// render stops at start-up: ConfigError "ORIGIN: chat_template line L,
// column C: unsupported filter 'x' (supported: ...)".
sdk::ChatTemplate make_jinja_chat_template(const JinjaChatTemplateSource& template_source);

}  // namespace ptrain::tokenizer
