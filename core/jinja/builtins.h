// The filters, tests, methods and global functions templates may call: the
// parser refuses any other name, the interpreter applies them.
#pragma once

#include "core/jinja/template_error.h"
#include "core/jinja/value.h"

#include <string>
#include <utility>
#include <vector>

namespace ptrain::jinja {

using Kwargs = std::vector<std::pair<std::string, Value>>;

bool is_known_filter(const std::string& name);
bool is_known_test(const std::string& name);
bool is_known_method(const std::string& name);
bool is_known_function(const std::string& name);
// "a, b, c" for an error message.
std::string known_filters();
std::string known_tests();
std::string known_methods();
std::string known_functions();

// Each throws TemplateError at `where` when the operand or arguments do not fit.
Value apply_filter(const std::string& name, const Value& operand, const std::vector<Value>& args, const Kwargs& kwargs,
                   const SourcePosition& where);
bool apply_test(const std::string& name, const Value& operand, const std::vector<Value>& args,
                const SourcePosition& where);
Value call_method(const Value& object, const std::string& name, const std::vector<Value>& args, const Kwargs& kwargs,
                  const SourcePosition& where);
// raise_exception throws TemplateRaised.
Value call_function(const std::string& name, const std::vector<Value>& args, const Kwargs& kwargs,
                    const SourcePosition& where);

}  // namespace ptrain::jinja
