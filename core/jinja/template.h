// A Jinja template as Hugging Face chat templates use it (transformers renders
// them with Jinja2 under trim_blocks and lstrip_blocks). Parsing refuses what
// the engine does not support, naming it and its line and column, so a run
// fails at start-up rather than at its first chat example.
#pragma once

#include "core/jinja/ast.h"
#include "core/jinja/value.h"

#include <string>
#include <utility>
#include <vector>

namespace ptrain::jinja {

// Where in the output the template was while it worked on what: the chat
// renderer finds each message's turn and the {% generation %} spans with it.
struct RenderTrace {
  struct Visit {
    const void* item;  // Value::identity() of the dict a for loop visited
    size_t begin;      // output offset when the iteration started
    size_t end;        // ... and when it ended
  };
  std::vector<Visit> visits;
  std::vector<std::pair<size_t, size_t>> generation_spans;  // [begin, end) of each {% generation %} block
};

class Template {
 public:
  // Throws TemplateError naming the first unsupported or malformed construct.
  explicit Template(const std::string& source);

  // Renders with `variables` as the template's globals. Throws TemplateError
  // (an operation on the wrong type, with its position) or TemplateRaised
  // (the template's raise_exception). Thread-safe: rendering keeps its state local.
  std::string render(const Dict& variables, RenderTrace* trace = nullptr) const;

  bool has_generation_blocks() const { return has_generation_blocks_; }

 private:
  Body body_;
  bool has_generation_blocks_ = false;
};

}  // namespace ptrain::jinja
