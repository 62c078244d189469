// Jinja lexer (see lexer.h). Mirrors jinja2 3.1's tokeniter: the end of a tag
// is only looked for outside brackets, string literals are decoded like
// Python's unicode-escape, and lstrip_blocks looks at the text since the last
// newline (or since a tag that ended a line).
#include "chat/jinja/lexer.h"

#include <cstring>

#include "chat/jinja/python_text.h"
#include "tokenizer/unicode_class.h"

namespace anymoe::jinja {
namespace {

[[noreturn]] void SyntaxError(int line, const std::string& what) {
  Fail("line " + std::to_string(line) + ": " + what, "TemplateSyntaxError");
}

std::string NormalizeNewlines(const std::string& source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool IsNameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Python whitespace at s[i]; sets *len.
bool SpaceAt(const std::string& s, size_t i, size_t* len) {
  uint32_t cp;
  if (DecodeUtf8At(s, i, &cp, len) != Utf8Step::kValid) return false;
  return IsPythonSpace(cp);
}

std::string RstripAll(const std::string& s) { return std::string(PyStrip(s, kStripRight, nullptr)); }

// Decodes the body of a string literal like Python's unicode-escape codec.
std::string DecodeStringLiteral(std::string_view body, int line) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (c != '\\' || i + 1 == body.size()) {
      out += c;
      continue;
    }
    const char e = body[++i];
    const auto hex = [&](size_t digits) {
      uint32_t v = 0;
      for (size_t k = 1; k <= digits; ++k) {
        const char h = i + k < body.size() ? body[i + k] : 'x';
        if (!std::isxdigit(static_cast<unsigned char>(h))) {
          SyntaxError(line, "truncated escape in string literal");
        }
        v = v * 16 + uint32_t(std::isdigit(static_cast<unsigned char>(h)) ? h - '0'
                                                                            : (std::tolower(h) - 'a' + 10));
      }
      i += digits;
      return v;
    };
    switch (e) {
      case '\n': break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case 'x': AppendUtf8(hex(2), &out); break;
      case 'u': AppendUtf8(hex(4), &out); break;
      case 'U': {
        const uint32_t v = hex(8);
        if (v > 0x10FFFF) SyntaxError(line, "illegal Unicode character in string literal");
        AppendUtf8(v, &out);
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          uint32_t v = uint32_t(e - '0');
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7'; ++k) {
            v = v * 8 + uint32_t(body[++i] - '0');
          }
          AppendUtf8(v, &out);
        } else {
          out += '\\';
          out += e;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  Lexer(const std::string& source, const LexOptions& options)
      : s_(NormalizeNewlines(source)), options_(options) {}

  std::vector<Token> Run() {
    while (pos_ < s_.size()) {
      const size_t open = FindTagOpen(pos_);
      std::string data = s_.substr(pos_, open - pos_);
      if (open == s_.size()) {
        Emit(TokenType::kData, std::move(data));
        pos_ = open;
        break;
      }
      const char kind = s_[open + 1];  // '{', '%' or '#'
      size_t p = open + 2;
      const char modifier = p < s_.size() && (s_[p] == '-' || s_[p] == '+') ? s_[p] : 0;
      if (modifier) ++p;
      if (modifier == '-') {
        data = RstripAll(data);
      } else if (modifier != '+' && options_.lstrip_blocks && kind != '{') {
        const size_t nl = data.rfind('\n');
        const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        if ((l_pos > 0 || line_starting_) && l_pos < data.size() && AllSpace(data, l_pos)) {
          data.resize(l_pos);
        }
      }
      Emit(TokenType::kData, std::move(data));
      CountLines(pos_, p);
      pos_ = p;
      if (kind == '#') {
        LexComment();
      } else if (kind == '{') {
        Emit(TokenType::kVarBegin, "");
        LexTagBody(false);
      } else if (IsRawTag()) {
        LexRaw();
      } else {
        Emit(TokenType::kBlockBegin, "");
        LexTagBody(true);
      }
    }
    Emit(TokenType::kEof, "");
    return std::move(tokens_);
  }

 private:
  size_t FindTagOpen(size_t from) const {
    for (size_t i = from; i + 1 < s_.size(); ++i) {
      if (s_[i] == '{' && (s_[i + 1] == '{' || s_[i + 1] == '%' || s_[i + 1] == '#')) return i;
    }
    return s_.size();
  }

  bool AllSpace(const std::string& d, size_t from) const {
    for (size_t i = from; i < d.size();) {
      size_t len;
      if (!SpaceAt(d, i, &len)) return false;
      i += len;
    }
    return true;
  }

  void Emit(TokenType type, std::string text) {
    if (type == TokenType::kData && text.empty()) return;
    tokens_.push_back({type, std::move(text), line_});
  }

  void CountLines(size_t from, size_t to) {
    for (size_t i = from; i < to && i < s_.size(); ++i) line_ += s_[i] == '\n';
  }

  // After a tag's closing delimiter: "-" strips whitespace, trim_blocks a newline.
  void AfterTagEnd(bool strip, bool block_like, bool keep) {
    const size_t start = pos_;
    if (strip) {
      size_t len;
      while (pos_ < s_.size() && SpaceAt(s_, pos_, &len)) pos_ += len;
    } else if (block_like && options_.trim_blocks && !keep && pos_ < s_.size() && s_[pos_] == '\n') {
      ++pos_;
    }
    line_starting_ = pos_ > start ? s_[pos_ - 1] == '\n' : false;
    CountLines(start, pos_);
  }

  void LexComment() {
    const size_t end = s_.find("#}", pos_);
    if (end == std::string::npos) SyntaxError(line_, "missing end of comment tag");
    const bool strip = end > pos_ && s_[end - 1] == '-';
    const bool keep = end > pos_ && s_[end - 1] == '+';
    CountLines(pos_, end + 2);
    pos_ = end + 2;
    AfterTagEnd(strip, true, keep);
  }

  bool IsRawTag() const {
    size_t p = pos_;
    while (p < s_.size() && std::isspace(static_cast<unsigned char>(s_[p]))) ++p;
    if (s_.compare(p, 3, "raw") != 0) return false;
    p += 3;
    while (p < s_.size() && std::isspace(static_cast<unsigned char>(s_[p]))) ++p;
    if (p < s_.size() && (s_[p] == '-' || s_[p] == '+')) ++p;
    return s_.compare(p, 2, "%}") == 0;
  }

  void LexRaw() {
    const size_t close = s_.find("%}", pos_);
    const bool strip_after_open = s_[close - 1] == '-';
    CountLines(pos_, close + 2);
    pos_ = close + 2;
    AfterTagEnd(strip_after_open, true, s_[close - 1] == '+');
    // Find {% [-] endraw [-] %}.
    for (size_t i = pos_; i + 1 < s_.size(); ++i) {
      if (s_[i] != '{' || s_[i + 1] != '%') continue;
      size_t p = i + 2;
      const bool strip_before = p < s_.size() && s_[p] == '-';
      if (p < s_.size() && (s_[p] == '-' || s_[p] == '+')) ++p;
      while (p < s_.size() && std::isspace(static_cast<unsigned char>(s_[p]))) ++p;
      if (s_.compare(p, 6, "endraw") != 0) continue;
      p += 6;
      while (p < s_.size() && std::isspace(static_cast<unsigned char>(s_[p]))) ++p;
      const bool strip_after = p < s_.size() && s_[p] == '-';
      const bool keep = p < s_.size() && s_[p] == '+';
      if (strip_after || keep) ++p;
      if (s_.compare(p, 2, "%}") != 0) continue;
      std::string data = s_.substr(pos_, i - pos_);
      if (strip_before) data = RstripAll(data);
      Emit(TokenType::kData, std::move(data));
      CountLines(pos_, p + 2);
      pos_ = p + 2;
      AfterTagEnd(strip_after, true, keep);
      return;
    }
    SyntaxError(line_, "missing end of raw directive");
  }

  void LexTagBody(bool block) {
    std::vector<char> brackets;
    while (true) {
      while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) {
        line_ += s_[pos_] == '\n';
        ++pos_;
      }
      if (pos_ >= s_.size()) SyntaxError(line_, block ? "unexpected end of template, expected '%}'"
                                                      : "unexpected end of template, expected '}}'");
      if (brackets.empty() && TryTagEnd(block)) return;
      const char c = s_[pos_];
      if (IsNameStart(c)) {
        size_t e = pos_;
        while (e < s_.size() && IsNameChar(s_[e])) ++e;
        Emit(TokenType::kName, s_.substr(pos_, e - pos_));
        pos_ = e;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        LexNumber();
      } else if (c == '\'' || c == '"') {
        LexString(c);
      } else {
        static const char* kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%",
                                     "~",  "<",  ">",  "=",  "(",  ")",  "[", "]", "{", "}", ",",
                                     ".",  ":",  "|"};
        const char* hit = nullptr;
        for (const char* op : kOps) {
          if (s_.compare(pos_, std::strlen(op), op) == 0) {
            hit = op;
            break;
          }
        }
        if (!hit) SyntaxError(line_, std::string("unexpected char '") + c + "'");
        const std::string op = hit;
        if (op == "(" || op == "[" || op == "{") brackets.push_back(op[0]);
        if (op == ")" || op == "]" || op == "}") {
          const char want = op == ")" ? '(' : op == "]" ? '[' : '{';
          if (brackets.empty() || brackets.back() != want) {
            SyntaxError(line_, "unexpected '" + op + "'");
          }
          brackets.pop_back();
        }
        Emit(TokenType::kOp, op);
        pos_ += op.size();
      }
    }
  }

  bool TryTagEnd(bool block) {
    const char* close = block ? "%}" : "}}";
    bool strip = false, keep = false;
    size_t p = pos_;
    if (s_[p] == '-' && s_.compare(p + 1, 2, close) == 0) {
      strip = true;
      ++p;
    } else if (block && s_[p] == '+' && s_.compare(p + 1, 2, close) == 0) {
      keep = true;
      ++p;
    } else if (s_.compare(p, 2, close) != 0) {
      return false;
    }
    pos_ = p + 2;
    Emit(block ? TokenType::kBlockEnd : TokenType::kVarEnd, "");
    AfterTagEnd(strip, block, keep);
    return true;
  }

  void LexNumber() {
    size_t e = pos_;
    while (e < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[e])) || s_[e] == '_')) ++e;
    bool is_float = false;
    if (e + 1 < s_.size() && s_[e] == '.' && std::isdigit(static_cast<unsigned char>(s_[e + 1]))) {
      is_float = true;
      ++e;
      while (e < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[e])) || s_[e] == '_')) ++e;
    }
    if (e < s_.size() && (s_[e] == 'e' || s_[e] == 'E')) {
      size_t x = e + 1;
      if (x < s_.size() && (s_[x] == '+' || s_[x] == '-')) ++x;
      if (x < s_.size() && std::isdigit(static_cast<unsigned char>(s_[x]))) {
        is_float = true;
        e = x;
        while (e < s_.size() && std::isdigit(static_cast<unsigned char>(s_[e]))) ++e;
      }
    }
    std::string text;
    for (size_t i = pos_; i < e; ++i) {
      if (s_[i] != '_') text += s_[i];
    }
    Emit(is_float ? TokenType::kFloat : TokenType::kInt, text);
    pos_ = e;
  }

  void LexString(char quote) {
    size_t e = pos_ + 1;
    while (e < s_.size() && s_[e] != quote) {
      if (s_[e] == '\\') ++e;
      ++e;
    }
    if (e >= s_.size()) SyntaxError(line_, "unexpected end of string");
    const int line = line_;
    CountLines(pos_, e);
    Emit(TokenType::kString, DecodeStringLiteral(std::string_view(s_).substr(pos_ + 1, e - pos_ - 1), line));
    pos_ = e + 1;
  }

  std::string s_;
  LexOptions options_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> Lex(const std::string& source, const LexOptions& options) {
  return Lexer(source, options).Run();
}

}  // namespace anymoe::jinja
