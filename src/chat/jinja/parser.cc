// Recursive-descent parser for the Jinja subset chat templates use, with
// jinja2's operator precedence (or < and < not < comparisons < + - < ~ <
// * / // % < ** < unary, then postfix . [] () and | filters / is tests).
// Tags that reach outside the template (include, import, extends) are refused.
#include <cstdlib>

#include "chat/jinja/ast.h"
#include "chat/jinja/lexer.h"

namespace anymoe::jinja {
namespace {

using ExprPtr = std::unique_ptr<Expr>;

class Parser {
 public:
  Parser(std::vector<Token> tokens, const ParseLimits& limits)
      : t_(std::move(tokens)), limits_(limits) {}

  Body ParseAll() {
    Body body = ParseBody({});
    if (Peek().type != TokenType::kEof) Error("unexpected '" + Peek().text + "'");
    return body;
  }

 private:
  // ---- token helpers
  const Token& Peek(size_t ahead = 0) const {
    return t_[std::min(i_ + ahead, t_.size() - 1)];
  }
  const Token& Next() {
    const Token& t = t_[i_];
    if (i_ + 1 < t_.size()) ++i_;
    return t;
  }
  bool IsOp(const char* op, size_t ahead = 0) const {
    return Peek(ahead).type == TokenType::kOp && Peek(ahead).text == op;
  }
  bool IsName(const char* name, size_t ahead = 0) const {
    return Peek(ahead).type == TokenType::kName && Peek(ahead).text == name;
  }
  bool AcceptOp(const char* op) {
    if (!IsOp(op)) return false;
    Next();
    return true;
  }
  bool AcceptName(const char* name) {
    if (!IsName(name)) return false;
    Next();
    return true;
  }
  void ExpectOp(const char* op) {
    if (!AcceptOp(op)) Error(std::string("expected '") + op + "'");
  }
  void ExpectName(const char* name) {
    if (!AcceptName(name)) Error(std::string("expected '") + name + "'");
  }
  std::string ExpectIdentifier() {
    if (Peek().type != TokenType::kName) Error("expected a name");
    return Next().text;
  }
  void ExpectBlockEnd() {
    if (Peek().type != TokenType::kBlockEnd) Error("expected end of statement block");
    Next();
  }
  [[noreturn]] void Error(const std::string& what) const {
    const Token& t = Peek();
    std::string got = t.type == TokenType::kEof ? "end of template" : "'" + t.text + "'";
    Fail("line " + std::to_string(t.line) + ": " + what + " (at " + got + ")",
         "TemplateSyntaxError");
  }

  struct Depth {
    Depth(Parser* p) : p(p) {
      if (++p->depth_ > p->limits_.max_nesting) {
        p->Error("template nesting deeper than " + std::to_string(p->limits_.max_nesting));
      }
    }
    ~Depth() { --p->depth_; }
    Parser* p;
  };

  ExprPtr Node(ExprKind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }

  // ---- statements
  // Parses until a block tag whose first name is in `ends` (left unconsumed, after {%).
  Body ParseBody(const std::vector<std::string>& ends) {
    Depth depth(this);
    Body body;
    while (true) {
      const Token& t = Peek();
      if (t.type == TokenType::kEof) {
        if (!ends.empty()) Error("missing '" + ends.back() + "'");
        return body;
      }
      if (t.type == TokenType::kData) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kText;
        s->line = t.line;
        s->text = Next().text;
        body.push_back(std::move(s));
      } else if (t.type == TokenType::kVarBegin) {
        Next();
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kOutput;
        s->line = t.line;
        s->expr = ParseTuple(true);
        if (Peek().type != TokenType::kVarEnd) Error("expected end of print statement");
        Next();
        body.push_back(std::move(s));
      } else if (t.type == TokenType::kBlockBegin) {
        const Token& name = Peek(1);
        for (const std::string& e : ends) {
          if (name.type == TokenType::kName && name.text == e) {
            Next();  // {%
            return body;
          }
        }
        Next();
        body.push_back(ParseStatement());
      } else {
        Error("unexpected token");
      }
    }
  }

  std::unique_ptr<Stmt> ParseStatement() {
    const int line = Peek().line;
    const std::string keyword = ExpectIdentifier();
    auto s = std::make_unique<Stmt>();
    s->line = line;
    if (keyword == "if") {
      s->kind = StmtKind::kIf;
      s->conditions.push_back(ParseTuple(false));
      ExpectBlockEnd();
      while (true) {
        s->bodies.push_back(ParseBody({"elif", "else", "endif"}));
        const std::string tag = Next().text;
        if (tag == "elif") {
          s->conditions.push_back(ParseTuple(false));
          ExpectBlockEnd();
        } else if (tag == "else") {
          ExpectBlockEnd();
          s->else_body = ParseBody({"endif"});
          Next();
          ExpectBlockEnd();
          break;
        } else {
          ExpectBlockEnd();
          break;
        }
      }
    } else if (keyword == "for") {
      s->kind = StmtKind::kFor;
      s->targets.push_back(ExpectIdentifier());
      while (AcceptOp(",")) s->targets.push_back(ExpectIdentifier());
      ExpectName("in");
      s->expr = ParseTuple(false, /*stop_at_if=*/true);
      if (AcceptName("if")) s->filter = ParseTuple(false, true);
      if (AcceptName("recursive")) Error("recursive loops are not supported");
      ExpectBlockEnd();
      s->body = ParseBody({"else", "endfor"});
      if (Next().text == "else") {
        ExpectBlockEnd();
        s->else_body = ParseBody({"endfor"});
        Next();
      }
      ExpectBlockEnd();
    } else if (keyword == "set") {
      const std::string first = ExpectIdentifier();
      if (AcceptOp(".")) {
        s->kind = StmtKind::kSet;
        s->attr_target = Node(ExprKind::kName, line);
        s->attr_target->name = first;
        s->attr_name = ExpectIdentifier();
      } else {
        s->targets.push_back(first);
        while (AcceptOp(",")) s->targets.push_back(ExpectIdentifier());
      }
      if (AcceptOp("=")) {
        s->kind = StmtKind::kSet;
        s->expr = ParseTuple(true);
        ExpectBlockEnd();
      } else {
        if (s->attr_target || s->targets.size() != 1) Error("expected '='");
        s->kind = StmtKind::kSetBlock;
        ExpectBlockEnd();
        s->body = ParseBody({"endset"});
        Next();
        ExpectBlockEnd();
      }
    } else if (keyword == "macro") {
      s->kind = StmtKind::kMacro;
      s->text = ExpectIdentifier();
      ExpectOp("(");
      while (!AcceptOp(")")) {
        if (!s->params.empty()) ExpectOp(",");
        if (AcceptOp(")")) break;
        s->params.push_back(ExpectIdentifier());
        s->defaults.push_back(AcceptOp("=") ? ParseExpression(true) : nullptr);
      }
      ExpectBlockEnd();
      s->body = ParseBody({"endmacro"});
      Next();
      if (Peek().type == TokenType::kName) Next();  // {% endmacro name %}
      ExpectBlockEnd();
    } else if (keyword == "break" || keyword == "continue") {
      s->kind = keyword == "break" ? StmtKind::kBreak : StmtKind::kContinue;
      ExpectBlockEnd();
    } else if (keyword == "generation") {
      s->kind = StmtKind::kBlock;
      ExpectBlockEnd();
      s->body = ParseBody({"endgeneration"});
      Next();
      ExpectBlockEnd();
    } else if (keyword == "include" || keyword == "import" || keyword == "from" ||
               keyword == "extends") {
      Fail("line " + std::to_string(line) + ": '" + keyword +
               "' is not allowed: chat templates cannot load other files",
           "SecurityError");
    } else {
      Fail("line " + std::to_string(line) + ": unsupported tag '" + keyword + "'",
           "TemplateSyntaxError");
    }
    return s;
  }

  // ---- expressions
  // A comma-separated list becomes a tuple (as in `{% set a = 1, 2 %}`).
  ExprPtr ParseTuple(bool with_condexpr, bool stop_at_if = false) {
    const int line = Peek().line;
    ExprPtr first = ParseExpression(with_condexpr && !stop_at_if);
    if (!IsOp(",")) return first;
    auto tuple = Node(ExprKind::kTuple, line);
    tuple->children.push_back(std::move(first));
    while (AcceptOp(",")) {
      if (Peek().type == TokenType::kBlockEnd || Peek().type == TokenType::kVarEnd ||
          IsName("if")) {
        break;
      }
      tuple->children.push_back(ParseExpression(with_condexpr && !stop_at_if));
    }
    return tuple;
  }

  ExprPtr ParseExpression(bool with_condexpr) {
    Depth depth(this);
    ExprPtr e = ParseOr();
    if (!with_condexpr) return e;
    while (IsName("if")) {
      const int line = Next().line;
      auto cond = Node(ExprKind::kCondition, line);
      cond->children.push_back(ParseOr());
      cond->children.push_back(std::move(e));
      cond->children.push_back(AcceptName("else") ? ParseExpression(true) : nullptr);
      e = std::move(cond);
    }
    return e;
  }

  ExprPtr Binary(const std::string& op, ExprPtr left, ExprPtr right, int line) {
    auto e = Node(ExprKind::kBinary, line);
    e->name = op;
    e->children.push_back(std::move(left));
    e->children.push_back(std::move(right));
    return e;
  }

  ExprPtr ParseOr() {
    ExprPtr e = ParseAnd();
    while (IsName("or")) e = Binary("or", std::move(e), (Next(), ParseAnd()), Peek().line);
    return e;
  }
  ExprPtr ParseAnd() {
    ExprPtr e = ParseNot();
    while (IsName("and")) e = Binary("and", std::move(e), (Next(), ParseNot()), Peek().line);
    return e;
  }
  ExprPtr ParseNot() {
    if (IsName("not")) {
      Depth depth(this);
      const int line = Next().line;
      auto e = Node(ExprKind::kUnary, line);
      e->name = "not";
      e->children.push_back(ParseNot());
      return e;
    }
    return ParseCompare();
  }
  ExprPtr ParseCompare() {
    ExprPtr e = ParseMath1();
    while (true) {
      const int line = Peek().line;
      std::string op;
      if (Peek().type == TokenType::kOp &&
          (IsOp("==") || IsOp("!=") || IsOp("<") || IsOp(">") || IsOp("<=") || IsOp(">="))) {
        op = Next().text;
      } else if (IsName("in")) {
        Next();
        op = "in";
      } else if (IsName("not") && IsName("in", 1)) {
        Next();
        Next();
        op = "notin";
      } else {
        return e;
      }
      e = Binary(op, std::move(e), ParseMath1(), line);
    }
  }
  ExprPtr ParseMath1() {
    ExprPtr e = ParseConcat();
    while (IsOp("+") || IsOp("-")) {
      const std::string op = Next().text;
      e = Binary(op, std::move(e), ParseConcat(), Peek().line);
    }
    return e;
  }
  ExprPtr ParseConcat() {
    ExprPtr e = ParseMath2();
    while (IsOp("~")) {
      Next();
      e = Binary("~", std::move(e), ParseMath2(), Peek().line);
    }
    return e;
  }
  ExprPtr ParseMath2() {
    ExprPtr e = ParsePow();
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      const std::string op = Next().text;
      e = Binary(op, std::move(e), ParsePow(), Peek().line);
    }
    return e;
  }
  ExprPtr ParsePow() {
    ExprPtr e = ParseUnary(true);
    while (IsOp("**")) {
      Next();
      e = Binary("**", std::move(e), ParseUnary(true), Peek().line);
    }
    return e;
  }
  ExprPtr ParseUnary(bool with_filter) {
    Depth depth(this);
    ExprPtr e;
    if (IsOp("-") || IsOp("+")) {
      const Token& t = Next();
      e = Node(ExprKind::kUnary, t.line);
      e->name = t.text;
      e->children.push_back(ParseUnary(false));
    } else {
      e = ParsePostfix(ParsePrimary());
    }
    return with_filter ? ParseFilterExpr(std::move(e)) : std::move(e);
  }

  ExprPtr ParsePrimary() {
    Depth depth(this);
    const Token& t = Peek();
    if (t.type == TokenType::kName) {
      Next();
      auto e = Node(ExprKind::kLiteral, t.line);
      if (t.text == "true" || t.text == "True") e->value = Value::Bool(true);
      else if (t.text == "false" || t.text == "False") e->value = Value::Bool(false);
      else if (t.text == "none" || t.text == "None") e->value = Value::None();
      else {
        e->kind = ExprKind::kName;
        e->name = t.text;
      }
      return e;
    }
    if (t.type == TokenType::kString) {
      std::string s = Next().text;
      while (Peek().type == TokenType::kString) s += Next().text;  // adjacent literals join
      auto e = Node(ExprKind::kLiteral, t.line);
      e->value = Value::Str(std::move(s));
      return e;
    }
    if (t.type == TokenType::kInt || t.type == TokenType::kFloat) {
      Next();
      auto e = Node(ExprKind::kLiteral, t.line);
      if (t.type == TokenType::kFloat) {
        e->value = Value::Float(std::strtod(t.text.c_str(), nullptr));
      } else {
        errno = 0;
        const long long v = std::strtoll(t.text.c_str(), nullptr, 10);
        if (errno == ERANGE) Error("integer literal out of range");
        e->value = Value::Int(v);
      }
      return e;
    }
    if (AcceptOp("(")) {
      if (AcceptOp(")")) {
        auto e = Node(ExprKind::kTuple, t.line);
        return e;
      }
      ExprPtr inner = ParseExpression(true);
      if (IsOp(",")) {
        auto tuple = Node(ExprKind::kTuple, t.line);
        tuple->children.push_back(std::move(inner));
        while (AcceptOp(",")) {
          if (IsOp(")")) break;
          tuple->children.push_back(ParseExpression(true));
        }
        inner = std::move(tuple);
      }
      ExpectOp(")");
      return inner;
    }
    if (AcceptOp("[")) {
      auto e = Node(ExprKind::kList, t.line);
      while (!AcceptOp("]")) {
        if (!e->children.empty()) ExpectOp(",");
        if (AcceptOp("]")) break;
        e->children.push_back(ParseExpression(true));
      }
      return e;
    }
    if (AcceptOp("{")) {
      auto e = Node(ExprKind::kDict, t.line);
      while (!AcceptOp("}")) {
        if (!e->children.empty()) ExpectOp(",");
        if (AcceptOp("}")) break;
        e->children.push_back(ParseExpression(true));
        ExpectOp(":");
        e->children.push_back(ParseExpression(true));
      }
      return e;
    }
    Error("unexpected token in expression");
  }

  ExprPtr ParsePostfix(ExprPtr e) {
    while (true) {
      const int line = Peek().line;
      if (AcceptOp(".")) {
        if (Peek().type == TokenType::kInt) {
          auto item = Node(ExprKind::kItem, line);
          auto index = Node(ExprKind::kLiteral, line);
          index->value = Value::Int(std::strtoll(Next().text.c_str(), nullptr, 10));
          item->children.push_back(std::move(e));
          item->children.push_back(std::move(index));
          e = std::move(item);
        } else {
          auto attr = Node(ExprKind::kAttr, line);
          attr->name = ExpectIdentifier();
          attr->children.push_back(std::move(e));
          e = std::move(attr);
        }
      } else if (AcceptOp("[")) {
        e = ParseSubscript(std::move(e), line);
      } else if (IsOp("(")) {
        auto call = Node(ExprKind::kCall, line);
        call->children.push_back(std::move(e));
        ParseCallArgs(call.get());
        e = std::move(call);
      } else {
        return e;
      }
    }
  }

  ExprPtr ParseSubscript(ExprPtr target, int line) {
    ExprPtr parts[3];
    int index = 0;
    bool is_slice = false;
    while (!IsOp("]")) {
      if (AcceptOp(":")) {
        is_slice = true;
        if (++index > 2) Error("invalid slice");
        continue;
      }
      if (parts[index]) Error("expected ']'");
      parts[index] = ParseExpression(true);
    }
    Next();
    if (!is_slice) {
      if (!parts[0]) Error("expected a subscript");
      auto item = Node(ExprKind::kItem, line);
      item->children.push_back(std::move(target));
      item->children.push_back(std::move(parts[0]));
      return item;
    }
    auto slice = Node(ExprKind::kSlice, line);
    slice->children.push_back(std::move(target));
    for (auto& p : parts) slice->children.push_back(std::move(p));
    return slice;
  }

  // ( args ) into e->children[1..] and e->keywords.
  void ParseCallArgs(Expr* e) {
    ExpectOp("(");
    bool first = true;
    while (!AcceptOp(")")) {
      if (!first) ExpectOp(",");
      first = false;
      if (AcceptOp(")")) break;
      if (Peek().type == TokenType::kName && IsOp("=", 1)) {
        e->keywords.push_back(Next().text);
        Next();
        e->children.push_back(ParseExpression(true));
      } else {
        if (!e->keywords.empty()) Error("positional argument after keyword argument");
        e->children.push_back(ParseExpression(true));
      }
    }
  }

  ExprPtr ParseFilterExpr(ExprPtr e) {
    while (true) {
      const int line = Peek().line;
      if (AcceptOp("|")) {
        auto f = Node(ExprKind::kFilter, line);
        f->name = ExpectIdentifier();
        while (AcceptOp(".")) f->name += "." + ExpectIdentifier();
        f->children.push_back(std::move(e));
        if (IsOp("(")) ParseCallArgs(f.get());
        e = std::move(f);
      } else if (IsName("is")) {
        Next();
        auto test = Node(ExprKind::kTest, line);
        test->negated = AcceptName("not");
        test->name = ExpectIdentifier();
        while (AcceptOp(".")) test->name += "." + ExpectIdentifier();
        test->children.push_back(std::move(e));
        const Token& t = Peek();
        if (IsOp("(")) {
          ParseCallArgs(test.get());
        } else if ((t.type == TokenType::kName || t.type == TokenType::kString ||
                    t.type == TokenType::kInt || t.type == TokenType::kFloat || IsOp("[") ||
                    IsOp("{")) &&
                   !IsName("else") && !IsName("or") && !IsName("and")) {
          if (IsName("is")) Error("cannot chain multiple tests with is");
          test->children.push_back(ParsePostfix(ParsePrimary()));
        }
        e = std::move(test);
      } else {
        return e;
      }
    }
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  ParseLimits limits_;
  int depth_ = 0;
};

}  // namespace

Body ParseTemplate(const std::string& source, const LexOptions& lex, const ParseLimits& limits) {
  if (source.size() > limits.max_source_bytes) {
    Fail("template is " + std::to_string(source.size()) + " bytes; the limit is " +
             std::to_string(limits.max_source_bytes),
         "TemplateSyntaxError");
  }
  return Parser(Lex(source, lex), limits).ParseAll();
}

}  // namespace anymoe::jinja
