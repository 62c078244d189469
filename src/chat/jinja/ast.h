// The syntax tree of a parsed Jinja template: expressions and statements, one
// generic node type each (a kind, a few fields and children), produced by
// parser.cc and walked by interpreter.cc.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "chat/jinja/value.h"

namespace anymoe::jinja {

enum class ExprKind {
  kLiteral,   // value
  kName,      // name
  kList,      // children
  kTuple,     // children
  kDict,      // children: key, value, key, value ...
  kAttr,      // children[0] . name
  kItem,      // children[0] [ children[1] ]
  kSlice,     // children[0] [ children[1] : children[2] : children[3] ] (null = omitted)
  kCall,      // children[0] ( children[1..] ), keyword names in `names` for the last ones
  kFilter,    // children[0] | name ( children[1..] ), keywords as in kCall
  kTest,      // children[0] is [not] name ( children[1..] ); negated
  kUnary,     // op children[0]: "-", "+", "not"
  kBinary,    // children[0] op children[1]: + - * / // % ** ~ == != < > <= >= in notin and or
  kCondition, // children[1] if children[0] else children[2] (children[2] null: no else)
};

struct Expr {
  ExprKind kind;
  std::string name;  // name, attribute, filter/test name, operator
  Value value;       // literal
  std::vector<std::unique_ptr<Expr>> children;
  std::vector<std::string> keywords;  // names of the trailing keyword arguments
  bool negated = false;
  int line = 0;
};

enum class StmtKind {
  kText,        // text
  kOutput,      // {{ expr }}
  kIf,          // conditions[i] -> bodies[i]; else_body
  kFor,         // targets in expr [if filter]; body; else_body
  kSet,         // targets (or attr target) = expr
  kSetBlock,    // targets[0] = rendered body
  kMacro,       // name(params = defaults) body
  kBreak,
  kContinue,
  kBlock,       // body rendered in place ({% generation %})
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  StmtKind kind;
  int line = 0;
  std::string text;                          // kText; macro name
  std::unique_ptr<Expr> expr;                // output, for iterable, set value
  std::unique_ptr<Expr> filter;              // for ... if filter
  std::unique_ptr<Expr> attr_target;         // set ns.attr: the namespace expression
  std::string attr_name;                     // set ns.attr: attribute
  std::vector<std::string> targets;          // for/set names
  std::vector<std::unique_ptr<Expr>> conditions;
  std::vector<Body> bodies;                  // if branches
  Body body, else_body;
  std::vector<std::string> params;                  // macro parameters
  std::vector<std::unique_ptr<Expr>> defaults;      // null when none
};

// Whitespace options, as transformers sets them for chat templates.
struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

struct ParseLimits {
  size_t max_source_bytes = size_t(1) << 20;
  int max_nesting = 128;  // expression and block nesting
};

// Parses a template; throws JinjaError (TemplateSyntaxError) with a line number.
Body ParseTemplate(const std::string& source, const LexOptions& lex, const ParseLimits& limits);

}  // namespace anymoe::jinja
