// Tokens to statements. Everything the engine cannot render is refused here,
// before any rendering: an unknown tag, filter, test, method or function is a
// TemplateError naming it and its position (docs/tokenizers.md, "The
// model's own template", lists what is supported).
#pragma once

#include "core/jinja/ast.h"
#include "core/jinja/lexer.h"

#include <vector>

namespace ptrain::jinja {

Body parse(const std::vector<Token>& tokens);

}  // namespace ptrain::jinja
