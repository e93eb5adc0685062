// The calculator the example environment offers as a tool: integer
// arithmetic with + - * / (truncating, as C++), parentheses and unary minus,
// the usual precedence. Pure functions, so the tests can check them alone.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ptrain::examples {

// The value of `expression`, or nullopt with `error` set for a malformed
// expression, a division by zero or a value beyond ±10^15.
std::optional<int64_t> evaluate_expression(const std::string& expression, std::string& error);

// The text inside the first <calc>...</calc> of `turn`, or nullopt when it has none.
std::optional<std::string> calculator_call(const std::string& turn);

}  // namespace ptrain::examples
