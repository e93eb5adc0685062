#include "core/jinja/template.h"

#include "core/jinja/interpreter.h"
#include "core/jinja/lexer.h"
#include "core/jinja/parser.h"

namespace ptrain::jinja {
namespace {

bool contains_generation(const Body& body) {
  for (const auto& stmt : body) {
    if (stmt->kind == Stmt::Kind::kGeneration || contains_generation(stmt->body) ||
        contains_generation(stmt->else_body)) {
      return true;
    }
    for (const auto& branch : stmt->branches) {
      if (contains_generation(branch.second)) return true;
    }
  }
  return false;
}

}  // namespace

Template::Template(const std::string& source) : body_(parse(tokenize(source))) {
  has_generation_blocks_ = contains_generation(body_);
}

std::string Template::render(const Dict& variables, RenderTrace* trace) const {
  return Interpreter(variables, trace).run(body_);
}

}  // namespace ptrain::jinja
