// The GBNF parser (gbnf_grammar.h): recursive descent over the text with the
// line rules of llama.cpp (a rule ends at a newline unless inside
// parentheses or after `|` / `::=`), then the checks that make the pushdown
// machine terminate: every rule defined, no left recursion (a rule reached
// again, through nullable prefixes, at a position that grows the stack),
// every rule able to end.
#include "chat/gbnf_grammar.h"

#include <algorithm>
#include <map>
#include <optional>

#include "tokenizer/unicode_class.h"

namespace anymoe {
namespace {

struct Symbol {
  bool is_rule = false;
  uint32_t rule = 0;
  bool negated = false;
  std::vector<GbnfCharRange> ranges;  // sorted, merged
};
using Sequence = std::vector<Symbol>;

Status Error(const std::string& code, const std::string& message) {
  return Status::Error(message, ErrorKind::kInvalidArgument, code, "grammar");
}

std::vector<GbnfCharRange> Canonical(std::vector<GbnfCharRange> r) {
  std::sort(r.begin(), r.end(), [](auto a, auto b) { return a.lo < b.lo; });
  std::vector<GbnfCharRange> out;
  for (const GbnfCharRange& x : r) {
    if (!out.empty() && x.lo <= out.back().hi + 1) {
      out.back().hi = std::max(out.back().hi, x.hi);
    } else {
      out.push_back(x);
    }
  }
  return out;
}

bool IsWordChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

class Parser {
 public:
  Parser(std::string_view text, const GbnfLimits& limits) : text_(text), limits_(limits) {}

  Expected<GbnfGrammar> Run() {
    if (text_.size() > limits_.max_bytes) {
      return Error("grammar_too_large", "the grammar has " + std::to_string(text_.size()) +
                                            " bytes, over the limit of " +
                                            std::to_string(limits_.max_bytes));
    }
    SkipSpace(true);
    while (pos_ < text_.size() && ok()) {
      ParseRule();
      SkipSpace(true);
    }
    if (!ok()) return status_;
    for (size_t r = 0; r < names_.size(); ++r) {
      if (!defined_[r]) {
        return Error("grammar_undefined_rule", "rule '" + names_[r] + "' is used at " +
                                                   Where(first_use_[r]) + " but never defined");
      }
    }
    auto root = ids_.find("root");
    if (root == ids_.end()) return Error("grammar_missing_root", "no rule named 'root'");
    return Build(root->second);
  }

 private:
  bool ok() const { return status_.ok(); }
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek(size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }

  std::string Where(size_t at) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return std::to_string(line) + ":" + std::to_string(col);
  }
  void Fail(const std::string& what) {
    if (ok()) status_ = Error("grammar_parse_error", what + " at " + Where(pos_));
  }
  void Limit(const std::string& what) {
    if (ok()) status_ = Error("grammar_too_large", what + " at " + Where(pos_));
  }

  // Spaces, tabs and comments; newlines too where a rule may go on.
  void SkipSpace(bool newline_ok) {
    while (!AtEnd()) {
      const char c = Peek();
      if (c == ' ' || c == '\t') {
        ++pos_;
      } else if (c == '#') {
        while (!AtEnd() && Peek() != '\n' && Peek() != '\r') ++pos_;
      } else if (newline_ok && (c == '\n' || c == '\r')) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  uint32_t RuleId(const std::string& name, size_t at) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    const uint32_t id = NewRule(name, at);
    return id;
  }
  uint32_t NewRule(const std::string& name, size_t at) {
    if (names_.size() >= limits_.max_rules) {
      Limit("more than " + std::to_string(limits_.max_rules) + " rules");
      return 0;
    }
    const uint32_t id = uint32_t(names_.size());
    names_.push_back(name);
    ids_[name] = id;
    defined_.push_back(false);
    first_use_.push_back(at);
    rules_.emplace_back();
    return id;
  }
  uint32_t Generated(uint32_t parent, std::vector<Sequence> alternatives) {
    const uint32_t id = NewRule(names_[parent] + "-" + std::to_string(++generated_[parent]), pos_);
    if (!ok()) return 0;
    defined_[id] = true;
    for (const Sequence& s : alternatives) Count(s.size() + 1);
    rules_[id] = std::move(alternatives);
    return id;
  }
  void Count(size_t elements) {
    elements_ += elements;
    if (elements_ > limits_.max_elements) {
      Limit("more than " + std::to_string(limits_.max_elements) + " elements after expanding repetitions");
    }
  }

  void ParseRule() {
    const size_t start = pos_;
    std::string name;
    while (!AtEnd() && IsWordChar(Peek())) name += text_[pos_++];
    if (name.empty()) return Fail("expected a rule name");
    SkipSpace(false);
    if (text_.substr(pos_, 3) != "::=") return Fail("expected '::=' after '" + name + "'");
    pos_ += 3;
    SkipSpace(true);
    const uint32_t id = RuleId(name, start);
    if (!ok()) return;
    if (defined_[id]) {
      pos_ = start;
      return Fail("rule '" + name + "' is defined twice");
    }
    defined_[id] = true;
    std::vector<Sequence> alternatives = ParseAlternatives(id, /*nested=*/false, 0);
    if (!ok()) return;
    for (const Sequence& s : alternatives) Count(s.size() + 1);
    rules_[id] = std::move(alternatives);
    if (Peek() == '\r') ++pos_;
    if (!AtEnd() && Peek() != '\n') return Fail("unexpected '" + std::string(1, Peek()) + "'");
  }

  std::vector<Sequence> ParseAlternatives(uint32_t rule, bool nested, int depth) {
    std::vector<Sequence> out;
    out.push_back(ParseSequence(rule, nested, depth));
    while (ok() && Peek() == '|') {
      ++pos_;
      SkipSpace(true);
      out.push_back(ParseSequence(rule, nested, depth));
    }
    return out;
  }

  Sequence ParseSequence(uint32_t rule, bool nested, int depth) {
    Sequence seq;
    size_t last_start = std::string_view::npos;  // where the last repeatable item begins
    while (ok() && !AtEnd()) {
      const char c = Peek();
      if (c == '"') {
        ++pos_;
        last_start = seq.size();
        while (ok() && Peek() != '"') {
          if (AtEnd() || Peek() == '\n' || Peek() == '\r') return Fail("unterminated string"), seq;
          const std::optional<uint32_t> cp = ParseChar();
          if (!cp) return seq;
          Symbol s;
          s.ranges = {{*cp, *cp}};
          seq.push_back(std::move(s));
        }
        ++pos_;
        if (seq.size() == last_start) last_start = std::string_view::npos;  // "" is empty
      } else if (c == '[') {
        ++pos_;
        Symbol s;
        if (Peek() == '^') {
          s.negated = true;
          ++pos_;
        }
        std::vector<GbnfCharRange> ranges;
        while (ok() && Peek() != ']') {
          if (AtEnd()) return Fail("unterminated character class"), seq;
          const std::optional<uint32_t> lo = ParseChar();
          if (!lo) return seq;
          uint32_t hi = *lo;
          if (Peek() == '-' && Peek(1) != ']' && pos_ + 1 < text_.size()) {
            ++pos_;
            const std::optional<uint32_t> h = ParseChar();
            if (!h) return seq;
            hi = *h;
            if (hi < *lo) return Fail("character range with its end before its start"), seq;
          }
          ranges.push_back({*lo, hi});
        }
        if (ranges.empty()) return Fail("empty character class"), seq;
        ++pos_;
        s.ranges = Canonical(std::move(ranges));
        last_start = seq.size();
        seq.push_back(std::move(s));
      } else if (c == '.') {
        ++pos_;
        Symbol s;
        s.ranges = {{0, 0x10FFFF}};
        last_start = seq.size();
        seq.push_back(std::move(s));
      } else if (IsWordChar(c)) {
        const size_t at = pos_;
        std::string name;
        while (!AtEnd() && IsWordChar(Peek())) name += text_[pos_++];
        // A name followed by ::= starts the next rule (only possible where
        // newlines are spaces, i.e. never at the top level).
        Symbol s;
        s.is_rule = true;
        s.rule = RuleId(name, at);
        last_start = seq.size();
        seq.push_back(std::move(s));
      } else if (c == '(') {
        if (depth + 1 > limits_.max_nesting) {
          Limit("parentheses nested deeper than " + std::to_string(limits_.max_nesting));
          return seq;
        }
        ++pos_;
        SkipSpace(true);
        std::vector<Sequence> inner = ParseAlternatives(rule, /*nested=*/true, depth + 1);
        if (!ok()) return seq;
        if (Peek() != ')') return Fail("expected ')'"), seq;
        ++pos_;
        Symbol s;
        s.is_rule = true;
        s.rule = Generated(rule, std::move(inner));
        last_start = seq.size();
        seq.push_back(std::move(s));
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (last_start == std::string_view::npos) return Fail("repetition with nothing to repeat"), seq;
        Repeat(rule, &seq, last_start);
        last_start = std::string_view::npos;
      } else {
        break;
      }
      if (ok()) SkipSpace(nested);
    }
    return seq;
  }

  std::optional<uint32_t> ParseUnsigned() {
    uint64_t v = 0;
    size_t digits = 0;
    while (Peek() >= '0' && Peek() <= '9') {
      v = v * 10 + uint64_t(Peek() - '0');
      ++pos_;
      if (++digits > 9) break;
    }
    if (digits == 0) return std::nullopt;
    if (v > limits_.max_repetition) {
      Limit("repetition count " + std::to_string(v) + " over the limit of " +
            std::to_string(limits_.max_repetition));
      return std::nullopt;
    }
    return uint32_t(v);
  }

  // seq[last_start:] with * + ? {m} {m,} {m,n} {,n} applied; nested
  // optional rules keep {m,n} linear in n.
  void Repeat(uint32_t rule, Sequence* seq, size_t last_start) {
    const char op = Peek();
    ++pos_;
    uint32_t min = 0, max = 0;
    bool unbounded = false;
    if (op == '*') {
      unbounded = true;
    } else if (op == '+') {
      min = 1;
      unbounded = true;
    } else if (op == '?') {
      max = 1;
    } else {
      SkipSpace(false);
      if (Peek() != ',') {
        const std::optional<uint32_t> m = ParseUnsigned();
        if (!m) return ok() ? Fail("expected a number in {}") : void();
        min = max = *m;
      }
      SkipSpace(false);
      if (Peek() == ',') {
        ++pos_;
        SkipSpace(false);
        if (Peek() == '}') {
          unbounded = true;
        } else {
          const std::optional<uint32_t> n = ParseUnsigned();
          if (!n) return ok() ? Fail("expected a number or '}' in {}") : void();
          max = *n;
          if (max < min) return Fail("{m,n} with n < m");
        }
        SkipSpace(false);
      }
      if (Peek() != '}') return Fail("expected '}'");
      ++pos_;
    }
    // The item as one symbol.
    Symbol item;
    if (seq->size() - last_start == 1) {
      item = (*seq)[last_start];
    } else {
      item.is_rule = true;
      item.rule = Generated(rule, {Sequence(seq->begin() + long(last_start), seq->end())});
      if (!ok()) return;
    }
    seq->resize(last_start);
    Count(min);
    if (!ok()) return;
    for (uint32_t i = 0; i < min; ++i) seq->push_back(item);
    Symbol ref;
    ref.is_rule = true;
    if (unbounded) {
      // star ::= item star | (empty)
      const uint32_t star = Generated(rule, {});
      if (!ok()) return;
      ref.rule = star;
      rules_[star] = {Sequence{item, ref}, Sequence{}};
      Count(4);
      seq->push_back(ref);
      return;
    }
    // opt_k ::= item opt_(k-1) | (empty); opt_1 ::= item | (empty)
    bool have = false;
    for (uint32_t k = min; k < max && ok(); ++k) {
      Sequence first{item};
      if (have) first.push_back(ref);
      ref.rule = Generated(rule, {std::move(first), Sequence{}});
      have = true;
    }
    if (have && ok()) seq->push_back(ref);
  }

  // One character of a literal or class: an escape or a UTF-8 sequence.
  std::optional<uint32_t> ParseChar() {
    if (Peek() == '\\') {
      const char e = Peek(1);
      pos_ += 2;
      switch (e) {
        case 'n': return '\n';
        case 't': return '\t';
        case 'r': return '\r';
        case '\\': return '\\';
        case '"': return '"';
        case '[': return '[';
        case ']': return ']';
        case '-': return '-';
        case 'x': return ParseHex(2);
        case 'u': return ParseHex(4);
        case 'U': return ParseHex(8);
        default:
          pos_ -= 2;
          Fail("unknown escape '\\" + std::string(1, e) + "'");
          return std::nullopt;
      }
    }
    uint32_t cp = 0;
    size_t len = 0;
    if (DecodeUtf8At(text_, pos_, &cp, &len) != Utf8Step::kValid) {
      Fail("invalid UTF-8");
      return std::nullopt;
    }
    pos_ += len;
    return cp;
  }
  std::optional<uint32_t> ParseHex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char c = Peek();
      int d = -1;
      if (c >= '0' && c <= '9') d = c - '0';
      if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      if (d < 0) {
        Fail("expected " + std::to_string(digits) + " hex digits");
        return std::nullopt;
      }
      v = v * 16 + uint32_t(d);
      ++pos_;
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
      Fail("escape is not a Unicode scalar value");
      return std::nullopt;
    }
    return v;
  }

  Expected<GbnfGrammar> Build(uint32_t root);

  std::string_view text_;
  const GbnfLimits& limits_;
  size_t pos_ = 0;
  Status status_;
  std::map<std::string, uint32_t> ids_;
  std::vector<std::string> names_;
  std::vector<bool> defined_;
  std::vector<size_t> first_use_;
  std::vector<std::vector<Sequence>> rules_;
  std::map<uint32_t, uint32_t> generated_;
  size_t elements_ = 0;

};

// Left recursion: an edge A -> B when B is referenced with only nullable
// symbols before it; an edge not at the end of its alternative keeps a
// continuation on the stack. A cycle through such an edge grows the stack
// without reading input, so the grammar is refused; cycles of tail edges
// only revisit the same stacks (the constraint's expansion dedups them).
Status CheckLeftRecursion(const std::vector<std::vector<Sequence>>& rules,
                          const std::vector<std::string>& names, const std::vector<bool>& nullable) {
  const size_t n = rules.size();
  struct Edge {
    uint32_t to;
    bool grows;
  };
  std::vector<std::vector<Edge>> edges(n);
  for (size_t r = 0; r < n; ++r) {
    for (const Sequence& s : rules[r]) {
      for (size_t i = 0; i < s.size(); ++i) {
        if (!s[i].is_rule) break;
        edges[r].push_back({s[i].rule, i + 1 < s.size()});
        if (!nullable[s[i].rule]) break;
      }
    }
  }
  // Tarjan's strongly connected components, iteratively.
  std::vector<int> index(n, -1), low(n, 0), comp(n, -1);
  std::vector<bool> on(n, false);
  std::vector<uint32_t> stack;
  int counter = 0, comps = 0;
  for (size_t start = 0; start < n; ++start) {
    if (index[start] >= 0) continue;
    std::vector<std::pair<uint32_t, size_t>> call{{uint32_t(start), 0}};
    index[start] = low[start] = counter++;
    stack.push_back(uint32_t(start));
    on[start] = true;
    while (!call.empty()) {
      auto& [v, next] = call.back();
      if (next < edges[v].size()) {
        const uint32_t w = edges[v][next++].to;
        if (index[w] < 0) {
          index[w] = low[w] = counter++;
          stack.push_back(w);
          on[w] = true;
          call.push_back({w, 0});
        } else if (on[w]) {
          low[v] = std::min(low[v], index[w]);
        }
        continue;
      }
      if (low[v] == index[v]) {
        uint32_t w;
        do {
          w = stack.back();
          stack.pop_back();
          on[w] = false;
          comp[w] = comps;
        } while (w != v);
        ++comps;
      }
      const uint32_t done = v;
      call.pop_back();
      if (!call.empty()) low[call.back().first] = std::min(low[call.back().first], low[done]);
    }
  }
  for (size_t r = 0; r < n; ++r) {
    for (const Edge& e : edges[r]) {
      if (e.grows && comp[e.to] == comp[r]) {
        return Error("grammar_left_recursion",
                     "rule '" + names[r] + "' is left-recursive (it reaches '" + names[e.to] +
                         "' again before reading a character)");
      }
    }
  }
  return Status::Ok();
}

Expected<GbnfGrammar> Parser::Build(uint32_t root) {
  const size_t n = rules_.size();
  // Nullable and productive rules, by fixed point (each round settles at
  // least one rule, so at most n + 1 rounds).
  std::vector<bool> nullable(n, false), productive(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      for (const Sequence& s : rules_[r]) {
        bool all_null = true, all_prod = true;
        for (const Symbol& x : s) {
          all_null = all_null && x.is_rule && nullable[x.rule];
          all_prod = all_prod && (!x.is_rule || productive[x.rule]);
        }
        if (all_null && !nullable[r]) nullable[r] = changed = true;
        if (all_prod && !productive[r]) productive[r] = changed = true;
      }
    }
  }
  for (size_t r = 0; r < n; ++r) {
    if (!productive[r]) {
      return Error("grammar_empty_language", "rule '" + names_[r] + "' derives no finite string");
    }
  }
  RETURN_IF_ERROR(CheckLeftRecursion(rules_, names_, nullable));

  GbnfGrammar g;
  g.root = root;
  g.rule_names = names_;
  g.alternatives.resize(n);
  for (size_t r = 0; r < n; ++r) {
    for (const Sequence& s : rules_[r]) {
      g.alternatives[r].push_back(uint32_t(g.elements.size()));
      for (const Symbol& x : s) {
        GbnfElement e;
        if (x.is_rule) {
          e.kind = GbnfElement::Kind::kRule;
          e.rule = x.rule;
        } else {
          e.kind = GbnfElement::Kind::kChars;
          e.negated = x.negated;
          e.ranges_begin = uint32_t(g.ranges.size());
          e.ranges_count = uint32_t(x.ranges.size());
          g.ranges.insert(g.ranges.end(), x.ranges.begin(), x.ranges.end());
        }
        g.elements.push_back(e);
      }
      g.elements.push_back(GbnfElement{});
    }
  }
  return g;
}

}  // namespace

bool GbnfGrammar::Matches(const GbnfElement& chars, uint32_t cp) const {
  return MatchesSome(chars, cp, cp);
}

bool GbnfGrammar::MatchesSome(const GbnfElement& chars, uint32_t lo, uint32_t hi) const {
  const GbnfCharRange* r = ranges.data() + chars.ranges_begin;
  const GbnfCharRange* end = r + chars.ranges_count;
  if (!chars.negated) {
    for (; r != end; ++r) {
      if (r->lo <= hi && lo <= r->hi) return true;
    }
    return false;
  }
  // Negated: some point of [lo, hi] lies outside the (sorted, merged) ranges.
  uint32_t at = lo;
  for (; r != end; ++r) {
    if (r->hi < at) continue;
    if (r->lo > at) return true;
    if (r->hi >= hi) return false;
    at = r->hi + 1;
  }
  return at <= hi;
}

Expected<GbnfGrammar> ParseGbnf(std::string_view text, const GbnfLimits& limits) {
  Parser parser(text, limits);
  return parser.Run();
}

}  // namespace anymoe
