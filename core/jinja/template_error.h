// The one error the Jinja engine throws: what went wrong and where in the
// template source (1-based line and column), so that a chat template that
// uses something unsupported is refused naming the construct and its place.
#pragma once

#include <stdexcept>
#include <string>

namespace ptrain::jinja {

struct SourcePosition {
  int line = 1;
  int column = 1;
};

class TemplateError : public std::runtime_error {
 public:
  TemplateError(const SourcePosition& position, const std::string& message)
      : std::runtime_error("line " + std::to_string(position.line) + ", column " + std::to_string(position.column) +
                           ": " + message),
        position_(position) {}
  const SourcePosition& position() const { return position_; }

 private:
  SourcePosition position_;
};

// raise_exception("...") in a template: the template refuses its input.
class TemplateRaised : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace ptrain::jinja
