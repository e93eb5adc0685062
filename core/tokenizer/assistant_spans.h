// Which characters of a rendered conversation an assistant-only loss trains
// (the rule is in jinja_chat_template.h).
#pragma once

#include "core/jinja/template.h"

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace ptrain::tokenizer {

struct TextSpan {
  size_t begin;
  size_t end;
};

// `rendered` is the conversation rendered with `trace`; `messages` are the
// message dicts it was rendered from. `render_prompt(k)` renders messages[:k]
// with the generation prompt. Spans are sorted and do not overlap.
std::vector<TextSpan> assistant_spans(const std::string& rendered, const jinja::RenderTrace& trace,
                                      bool has_generation_blocks, const std::vector<jinja::Value>& messages,
                                      const std::function<std::string(size_t)>& render_prompt);

}  // namespace ptrain::tokenizer
