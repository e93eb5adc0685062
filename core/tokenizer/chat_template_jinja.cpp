#include "core/tokenizer/chat_template_jinja.h"

#include <algorithm>

namespace ptrain::tokenizer {
namespace {

// A Jinja (Python-style) single-quoted string literal.
std::string quoted(const std::string& text) {
  std::string out = "'";
  for (const char c : text) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\'':
        out += "\\'";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += c;
    }
  }
  return out + "'";
}

// Template text as output expressions, its {bos}/{eos} as the tokenizer's token texts.
std::string emit(const std::string& text) {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    const size_t next = std::min(text.find("{bos}", start), text.find("{eos}", start));
    if (next > start) out += "{{- " + quoted(text.substr(start, next - start)) + " -}}";
    if (next == std::string::npos) break;
    out += text.compare(next, 5, "{bos}") == 0 ? "{{- bos_token -}}" : "{{- eos_token -}}";
    start = next + 5;
  }
  return out;
}

std::string role_branch(const char* keyword, const char* role, const sdk::ChatTemplate::Role& parts, bool trim) {
  return std::string("{%- ") + keyword + " message['role'] == '" + role + "' -%}\n  " + emit(parts.prefix) +
         (trim ? "{{- message['content'] | trim -}}" : "{{- message['content'] -}}") + emit(parts.suffix) + "\n";
}

}  // namespace

std::string chat_template_jinja(const sdk::ChatTemplate& t) {
  std::string out =
      "{#- ptrain's \"" + t.name + "\" chat template written as Jinja: it renders the text ptrain trained on -#}\n";
  out += emit(t.begin) + (t.begin.empty() ? "" : "\n");
  out += "{%- for message in messages -%}\n";
  out += role_branch("if", "system", t.system, t.trim_content);
  out += role_branch("elif", "user", t.user, t.trim_content);
  out += role_branch("elif", "assistant", t.assistant, t.trim_content);
  out += "{%- else -%}\n  {{- raise_exception('the " + t.name +
         " chat template knows the roles system, user and assistant') -}}\n";
  out += "{%- endif -%}\n";
  if (!t.turn_separator.empty()) out += emit(t.turn_separator) + "\n";
  out += "{%- endfor -%}\n";
  out += "{%- if add_generation_prompt -%}\n  " + emit(t.assistant.prefix) + "\n{%- endif -%}\n";
  return out;
}

}  // namespace ptrain::tokenizer
