// Python's binary operators on Jinja values (and/or short-circuit in the
// interpreter): + - * / // % ** ~, comparisons, in / not in; slicing.
#pragma once

#include "core/jinja/template_error.h"
#include "core/jinja/value.h"

#include <optional>
#include <string>

namespace ptrain::jinja {

// Throws TemplateError at `where` for operand types Python would refuse.
Value binary_operation(const std::string& op, const Value& left, const Value& right, const SourcePosition& where);

// value[start:stop:step] of a list or string, Python's rules for absent and negative bounds.
Value slice(const Value& value, std::optional<int64_t> start, std::optional<int64_t> stop, std::optional<int64_t> step,
            const SourcePosition& where);

}  // namespace ptrain::jinja
