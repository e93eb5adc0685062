// Template source to tokens, with the whitespace rules transformers renders
// chat templates under: trim_blocks and lstrip_blocks on, one trailing
// newline of the template dropped, and {%- -%} {{- -}} {#- -#} stripping the
// whitespace beside a tag.
#pragma once

#include "core/jinja/template_error.h"

#include <string>
#include <vector>

namespace ptrain::jinja {

struct Token {
  enum class Kind {
    kText,             // literal template text
    kOpenStatement,    // {%
    kCloseStatement,   // %}
    kOpenExpression,   // {{
    kCloseExpression,  // }}
    kName,             // identifiers and keywords
    kString,           // a string literal, unescaped
    kInteger,
    kFloat,
    kOperator,  // punctuation and operators: ( ) [ ] { } , . : | = + - ~ * / // % ** == != < <= > >=
    kEnd,
  };
  Kind kind;
  std::string text;
  SourcePosition position;
};

// Throws TemplateError naming the position of an unterminated tag, comment
// or string, or of a character no token starts with.
std::vector<Token> tokenize(const std::string& source);

}  // namespace ptrain::jinja
