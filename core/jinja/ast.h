// The parsed template: expressions and statements, each with the source
// position it came from so that render-time errors name it too.
#pragma once

#include "core/jinja/template_error.h"
#include "core/jinja/value.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ptrain::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,      // literal
    kName,         // name
    kList,         // [args...]
    kTuple,        // (a, b) or a, b
    kDict,         // {keys[i]: args[i]}
    kAttribute,    // args[0].name
    kSubscript,    // args[0][args[1]]
    kSlice,        // args[0][args[1]:args[2]:args[3]] (null parts absent)
    kCall,         // args[0](args[1..], kwargs)
    kFilter,       // args[0] | name(args[1..], kwargs)
    kTest,         // args[0] is [not] name(args[1..])
    kUnary,        // name args[0]: "not", "-", "+"
    kBinary,       // args[0] name args[1]: and or + - ~ * / // % ** == != < <= > >= in "not in"
    kConditional,  // args[0] if args[1] else args[2] (args[2] absent: undefined)
  };
  Kind kind;
  SourcePosition position;
  std::string name;
  Value literal;
  std::vector<ExprPtr> args;  // an entry may be null (a slice's omitted part)
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<ExprPtr> keys;  // kDict
  bool negated = false;       // kTest: "is not"
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum class Kind {
    kText,    // text
    kOutput,  // {{ value }}
    kIf,      // branches, else_body
    kFor,     // for targets in value [if condition]: body else else_body
    kSet,     // set target = value, or {% set target %}body{% endset %}
    kBreak,
    kContinue,
    kGeneration,  // {% generation %}body{% endgeneration %}: transformers' assistant-mask marker
  };
  Kind kind;
  SourcePosition position;
  std::string text;
  ExprPtr value;                                   // output, for iterable, set value
  ExprPtr target;                                  // set: name, attribute or tuple of names
  std::vector<std::string> loop_targets;           // for: one name, or names to unpack
  ExprPtr condition;                               // for ... if condition
  std::vector<std::pair<ExprPtr, Body>> branches;  // if/elif
  Body body;
  Body else_body;
};

}  // namespace ptrain::jinja
