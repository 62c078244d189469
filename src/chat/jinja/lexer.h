// Splits a Jinja template into text and the tokens inside {{ }}, {% %} tags,
// applying jinja2's whitespace rules: "-" strips all whitespace on that side,
// trim_blocks drops the newline after a block or comment tag, lstrip_blocks
// strips a line's indentation before one; "+" disables either. Newlines are
// normalised and one trailing newline dropped, as jinja2 does.
#pragma once

#include <string>
#include <vector>

#include "chat/jinja/ast.h"

namespace anymoe::jinja {

enum class TokenType {
  kData, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd,
  kName, kString, kInt, kFloat, kOp, kEof
};

struct Token {
  TokenType type;
  std::string text;  // data, name, decoded string literal, operator, number spelling
  int line = 0;
};

// Throws JinjaError (TemplateSyntaxError).
std::vector<Token> Lex(const std::string& source, const LexOptions& options);

}  // namespace anymoe::jinja
