#include "calculator.h"

#include <cctype>
#include <cstdlib>

namespace ptrain::examples {
namespace {

constexpr int64_t kLimit = 1000000000000000;  // 10^15: far from int64 overflow in one product

// Recursive descent over expression := term (('+'|'-') term)*, term := factor (('*'|'/') factor)*,
// factor := '-' factor | '(' expression ')' | digits.
class Parser {
 public:
  explicit Parser(const std::string& text) : text_(text) {}

  std::optional<int64_t> parse(std::string& error) {
    std::optional<int64_t> value = expression();
    skip_blanks();
    if (value && position_ != text_.size()) fail("unexpected '" + std::string(1, text_[position_]) + "'");
    if (!error_.empty()) {
      error = error_;
      return std::nullopt;
    }
    return value;
  }

 private:
  void skip_blanks() {
    while (position_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[position_]))) ++position_;
  }
  bool take(char c) {
    skip_blanks();
    if (position_ < text_.size() && text_[position_] == c) {
      ++position_;
      return true;
    }
    return false;
  }
  std::optional<int64_t> fail(const std::string& message) {
    if (error_.empty()) error_ = message;
    return std::nullopt;
  }
  std::optional<int64_t> checked(int64_t value) {
    if (value > kLimit || value < -kLimit) return fail("result out of range");
    return value;
  }

  std::optional<int64_t> expression() {
    std::optional<int64_t> value = term();
    while (value) {
      if (take('+')) {
        const std::optional<int64_t> rhs = term();
        value = rhs ? checked(*value + *rhs) : std::nullopt;
      } else if (take('-')) {
        const std::optional<int64_t> rhs = term();
        value = rhs ? checked(*value - *rhs) : std::nullopt;
      } else {
        break;
      }
    }
    return value;
  }

  std::optional<int64_t> term() {
    std::optional<int64_t> value = factor();
    while (value) {
      if (take('*')) {
        const std::optional<int64_t> rhs = factor();
        value = rhs ? checked(*value * *rhs) : std::nullopt;
      } else if (take('/')) {
        const std::optional<int64_t> rhs = factor();
        if (rhs && *rhs == 0) return fail("division by zero");
        value = rhs ? checked(*value / *rhs) : std::nullopt;
      } else {
        break;
      }
    }
    return value;
  }

  std::optional<int64_t> factor() {
    if (take('-')) {
      const std::optional<int64_t> value = factor();
      return value ? std::optional<int64_t>(-*value) : std::nullopt;
    }
    if (take('(')) {
      const std::optional<int64_t> value = expression();
      if (value && !take(')')) return fail("missing ')'");
      return value;
    }
    skip_blanks();
    const size_t start = position_;
    while (position_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[position_]))) ++position_;
    if (position_ == start) return fail(position_ < text_.size() ? "expected a number" : "expression ends early");
    if (position_ - start > 15) return fail("number too long");
    return std::strtoll(text_.substr(start, position_ - start).c_str(), nullptr, 10);
  }

  const std::string& text_;
  size_t position_ = 0;
  std::string error_;
};

}  // namespace

std::optional<int64_t> evaluate_expression(const std::string& expression, std::string& error) {
  return Parser(expression).parse(error);
}

std::optional<std::string> calculator_call(const std::string& turn) {
  const std::string open = "<calc>";
  const std::string close = "</calc>";
  const size_t begin = turn.find(open);
  if (begin == std::string::npos) return std::nullopt;
  const size_t end = turn.find(close, begin + open.size());
  if (end == std::string::npos) return turn.substr(begin + open.size());
  return turn.substr(begin + open.size(), end - begin - open.size());
}

}  // namespace ptrain::examples
