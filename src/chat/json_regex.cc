// ECMA-262 pattern subset (json_regex.h): a recursive-descent parser to a small
// syntax tree, then Thompson construction into a ByteNfa and subset
// construction. Sizes are capped at every stage so a hostile pattern fails
// with a named limit in bounded time and memory.
#include "chat/json_regex.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace anymoe {
namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;  // code points, inclusive

constexpr int kMaxNesting = 64;
constexpr size_t kMaxTreeNodes = 20000;
constexpr size_t kMaxNfaStates = 200000;
constexpr int kMaxRepeat = 1000;

struct Re {
  enum Kind { kEmpty, kSet, kConcat, kAlt, kRepeat } kind = kEmpty;
  Ranges set;
  std::vector<Re> kids;
  int min = 0, max = -1;  // kRepeat; max -1: unbounded
};

Ranges Normalize(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (const auto& x : r) {
    if (!out.empty() && x.first <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, x.second);
    } else {
      out.push_back(x);
    }
  }
  return out;
}

Ranges Complement(const Ranges& r, uint32_t top) {
  Ranges out;
  uint32_t lo = 0;
  for (const auto& [a, b] : Normalize(r)) {
    if (a > lo) out.emplace_back(lo, a - 1);
    lo = b + 1;
  }
  if (lo <= top) out.emplace_back(lo, top);
  return out;
}

// What a JSON string may hold without escapes: no '"', '\\' or control bytes.
Ranges Restrict(const Ranges& r) {
  static const Ranges kAllowed = {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0x10FFFF}};
  Ranges out;
  for (const auto& [a, b] : Normalize(r)) {
    for (const auto& [c, d] : kAllowed) {
      const uint32_t lo = std::max(a, c), hi = std::min(b, d);
      if (lo <= hi) out.emplace_back(lo, hi);
    }
  }
  return out;
}

const Ranges kDigit = {{'0', '9'}};
const Ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
// ECMA-262 white space and line terminators, plus what Python's str.isspace adds.
const Ranges kSpace = {{0x09, 0x0D}, {0x1C, 0x20}, {0x85, 0x85}, {0xA0, 0xA0}, {0x1680, 0x1680},
                       {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F},
                       {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};

class Parser {
 public:
  explicit Parser(const std::string& p) : p_(p) {}

  Status Parse(std::vector<Re>* alternatives, std::vector<std::pair<bool, bool>>* anchors) {
    while (true) {
      bool start = false, end = false;
      if (Peek() == '^') ++i_, start = true;
      Re r;
      RETURN_IF_ERROR(Concat(0, &r, &end));
      alternatives->push_back(std::move(r));
      anchors->emplace_back(start, end);
      if (i_ >= p_.size()) return Status::Ok();
      if (p_[i_] == ')') return Fail("unbalanced ')'");
      ++i_;  // '|'
    }
  }

 private:
  int Peek() const { return i_ < p_.size() ? uint8_t(p_[i_]) : -1; }
  Status Fail(const std::string& why) const {
    return Status::Error(why + " (at offset " + std::to_string(i_) + ")");
  }
  Status Count() {
    if (++nodes_ > kMaxTreeNodes) return Fail("more than " + std::to_string(kMaxTreeNodes) + " pattern elements");
    return Status::Ok();
  }

  // A sequence up to '|' or ')' (or the end). `end_anchor`: top level only.
  Status Concat(int nesting, Re* out, bool* end_anchor) {
    out->kind = Re::kConcat;
    while (i_ < p_.size() && p_[i_] != '|' && p_[i_] != ')') {
      if (p_[i_] == '$') {
        ++i_;
        if (end_anchor && (i_ == p_.size() || p_[i_] == '|')) {
          *end_anchor = true;
          break;
        }
        return Fail("the anchor '$' is only supported at the end of a top-level alternative");
      }
      if (p_[i_] == '^') return Fail("the anchor '^' is only supported at the start of a top-level alternative");
      Re atom;
      RETURN_IF_ERROR(Atom(nesting, &atom));
      RETURN_IF_ERROR(Quantifier(&atom));
      out->kids.push_back(std::move(atom));
    }
    return Status::Ok();
  }

  Status Alternation(int nesting, Re* out) {
    if (nesting > kMaxNesting) return Fail("groups nested deeper than " + std::to_string(kMaxNesting));
    out->kind = Re::kAlt;
    while (true) {
      Re r;
      RETURN_IF_ERROR(Concat(nesting, &r, nullptr));
      out->kids.push_back(std::move(r));
      if (Peek() != '|') return Status::Ok();
      ++i_;
    }
  }

  Status Quantifier(Re* atom) {
    int min, max;
    const int c = Peek();
    if (c == '*') min = 0, max = -1, ++i_;
    else if (c == '+') min = 1, max = -1, ++i_;
    else if (c == '?') min = 0, max = 1, ++i_;
    else if (c == '{' && Braces(&min, &max)) {
    } else {
      return Status::Ok();
    }
    if (Peek() == '?') ++i_;  // lazy: the same language
    if (Peek() == '*' || Peek() == '+' || Peek() == '?') return Fail("a quantifier cannot follow a quantifier");
    if (Peek() == '{') {
      int a, b;
      if (Braces(&a, &b)) return Fail("a quantifier cannot follow a quantifier");
    }
    RETURN_IF_ERROR(Count());
    Re r;
    r.kind = Re::kRepeat;
    r.min = min;
    r.max = max;
    r.kids.push_back(std::move(*atom));
    *atom = std::move(r);
    if (min > kMaxRepeat || max > kMaxRepeat) {
      return Fail("a repeat count above " + std::to_string(kMaxRepeat));
    }
    if (max >= 0 && max < min) return Fail("a repeat {n,m} with m < n");
    return Status::Ok();
  }

  // {n}, {n,}, {n,m}; false (nothing consumed) when not a quantifier, as ECMA
  // reads a lone '{' as a literal.
  bool Braces(int* min, int* max) {
    size_t j = i_ + 1;
    const auto number = [&](int* v) {
      const size_t from = j;
      int64_t x = 0;
      while (j < p_.size() && p_[j] >= '0' && p_[j] <= '9') x = std::min<int64_t>(x * 10 + (p_[j++] - '0'), 1 << 30);
      *v = int(x);
      return j > from;
    };
    int lo, hi;
    if (!number(&lo)) return false;
    hi = lo;
    if (j < p_.size() && p_[j] == ',') {
      ++j;
      if (!number(&hi)) hi = -1;
    }
    if (j >= p_.size() || p_[j] != '}') return false;
    i_ = j + 1;
    *min = lo;
    *max = hi;
    return true;
  }

  Status Atom(int nesting, Re* out) {
    RETURN_IF_ERROR(Count());
    const uint8_t c = uint8_t(p_[i_]);
    if (c == '(') {
      ++i_;
      if (Peek() == '?') {
        const std::string head = p_.substr(i_, 3);
        if (head.compare(0, 2, "?:") == 0) {
          i_ += 2;
        } else if (head == "?<=" || head == "?<!" || head.compare(0, 2, "?=") == 0 || head.compare(0, 2, "?!") == 0) {
          return Fail("look-around assertions are not supported");
        } else if (head.compare(0, 2, "?<") == 0 || head.compare(0, 3, "?P<") == 0) {
          const size_t close = p_.find('>', i_);
          if (close == std::string::npos) return Fail("an unterminated group name");
          i_ = close + 1;
        } else {
          return Fail("the group syntax '(" + head + "' is not supported");
        }
      }
      RETURN_IF_ERROR(Alternation(nesting + 1, out));
      if (Peek() != ')') return Fail("a missing ')'");
      ++i_;
      return Status::Ok();
    }
    out->kind = Re::kSet;
    if (c == '.') {
      ++i_;
      out->set = Complement({{0x0A, 0x0A}, {0x0D, 0x0D}, {0x2028, 0x2029}}, 0x10FFFF);
      return Status::Ok();
    }
    if (c == '[') return Class(&out->set);
    if (c == '*' || c == '+' || c == '?') return Fail("a quantifier with nothing to repeat");
    if (c == '{') {
      int a, b;
      const size_t keep = i_;
      if (Braces(&a, &b)) {
        i_ = keep;
        return Fail("a quantifier with nothing to repeat");
      }
    }
    if (c == '\\') {
      bool ascii_only = false;
      return Escape(false, &out->set, &ascii_only);
    }
    uint32_t cp;
    RETURN_IF_ERROR(CodePoint(&cp));
    out->set = {{cp, cp}};
    return Status::Ok();
  }

  // One UTF-8 code point of the pattern text.
  Status CodePoint(uint32_t* cp) {
    const uint8_t c = uint8_t(p_[i_]);
    const int n = c < 0x80 ? 0 : c >= 0xF8 ? -1 : c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : -1;
    if (n < 0) return Fail("the pattern is not valid UTF-8");
    *cp = n == 0 ? c : uint32_t(c & (0x3F >> n));
    ++i_;
    for (int k = 0; k < n; ++k) {
      if (i_ >= p_.size() || (uint8_t(p_[i_]) & 0xC0) != 0x80) return Fail("the pattern is not valid UTF-8");
      *cp = (*cp << 6) | (uint8_t(p_[i_++]) & 0x3F);
    }
    return Status::Ok();
  }

  Status Hex(int digits, uint32_t* v) {
    *v = 0;
    for (int k = 0; k < digits; ++k, ++i_) {
      const int c = Peek();
      int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) return Fail("a bad hexadecimal escape");
      *v = *v * 16 + uint32_t(d);
    }
    return Status::Ok();
  }

  // After '\\'. `in_class`: inside [...] (where \b is backspace).
  Status Escape(bool in_class, Ranges* out, bool* ascii_only) {
    ++i_;
    if (i_ >= p_.size()) return Fail("a pattern ending in '\\'");
    const char e = p_[i_];
    const auto single = [&](uint32_t cp) {
      *out = {{cp, cp}};
      ++i_;
      return Status::Ok();
    };
    switch (e) {
      case 'd': ++i_, *out = kDigit; return Status::Ok();
      case 'w': ++i_, *out = kWord; return Status::Ok();
      case 's': ++i_, *out = {{' ', ' '}}; return Status::Ok();  // the one space both engines agree on
      case 'D': ++i_, *out = Complement(kDigit, 0x7F), *ascii_only = true; return Status::Ok();
      case 'W': ++i_, *out = Complement(kWord, 0x7F), *ascii_only = true; return Status::Ok();
      case 'S': ++i_, *out = Complement(kSpace, 0x7F), *ascii_only = true; return Status::Ok();
      case 't': return single('\t');
      case 'n': return single('\n');
      case 'r': return single('\r');
      case 'f': return single('\f');
      case 'v': return single('\v');
      case '0': return single(0);
      case 'b':
        if (in_class) return single('\b');
        return Fail("the word-boundary assertion \\b is not supported");
      case 'B': return Fail("the assertion \\B is not supported");
      case 'x': {
        ++i_;
        uint32_t v;
        RETURN_IF_ERROR(Hex(2, &v));
        *out = {{v, v}};
        return Status::Ok();
      }
      case 'u': {
        ++i_;
        uint32_t v;
        if (Peek() == '{') return Fail("\\u{...} escapes are not supported");
        RETURN_IF_ERROR(Hex(4, &v));
        *out = {{v, v}};
        return Status::Ok();
      }
      case 'p':
      case 'P': return Fail("Unicode property escapes (\\p{...}) are not supported");
      case 'k': return Fail("back-references (\\k<name>) are not supported");
      case 'c': return Fail("control escapes (\\cX) are not supported");
      default: break;
    }
    if (e >= '1' && e <= '9') return Fail(std::string("back-references (\\") + e + ") are not supported");
    if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) {
      return Fail(std::string("the escape \\") + e + " is not supported");
    }
    uint32_t cp;
    RETURN_IF_ERROR(CodePoint(&cp));
    *out = {{cp, cp}};
    return Status::Ok();
  }

  Status Class(Ranges* out) {
    ++i_;  // '['
    bool negate = false, ascii_only = false;
    if (Peek() == '^') negate = true, ++i_;
    if (Peek() == ']') return Fail("an empty class '[]'");
    Ranges set;
    while (true) {
      if (i_ >= p_.size()) return Fail("a missing ']'");
      if (p_[i_] == ']') {
        ++i_;
        break;
      }
      Ranges item;
      bool is_single = false;
      RETURN_IF_ERROR(ClassAtom(&item, &ascii_only, &is_single));
      if (is_single && Peek() == '-' && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
        ++i_;
        Ranges hi;
        bool hi_single = false;
        RETURN_IF_ERROR(ClassAtom(&hi, &ascii_only, &hi_single));
        if (!hi_single || hi[0].first < item[0].first) return Fail("a bad class range");
        item = {{item[0].first, hi[0].first}};
      }
      set.insert(set.end(), item.begin(), item.end());
    }
    if (negate) {
      // A complement of \d, \w or \s differs between ECMA-262 and Python
      // outside ASCII: stay inside it.
      *out = Complement(set, ascii_only ? 0x7F : 0x10FFFF);
    } else {
      *out = Normalize(set);
    }
    return Status::Ok();
  }

  Status ClassAtom(Ranges* item, bool* ascii_only, bool* single) {
    if (p_[i_] == '\\') {
      const char e = i_ + 1 < p_.size() ? p_[i_ + 1] : 0;
      if (e == 'd' || e == 'w' || e == 's' || e == 'D' || e == 'W' || e == 'S') *ascii_only = true;
      RETURN_IF_ERROR(Escape(true, item, ascii_only));
    } else {
      if (p_[i_] == '[' && i_ + 1 < p_.size() && p_[i_ + 1] == ':') return Fail("POSIX classes are not supported");
      uint32_t cp = 0;
      RETURN_IF_ERROR(CodePoint(&cp));
      *item = {{cp, cp}};
    }
    *single = item->size() == 1 && (*item)[0].first == (*item)[0].second;
    return Status::Ok();
  }

  const std::string& p_;
  size_t i_ = 0;
  size_t nodes_ = 0;
};

class NfaBuilder {
 public:
  Status Build(const Re& r, int32_t from, int32_t to) {
    if (nfa.size() > kMaxNfaStates) {
      return Status::Error("the pattern expands to more than " + std::to_string(kMaxNfaStates) + " NFA states");
    }
    switch (r.kind) {
      case Re::kEmpty: nfa.AddEpsilon(from, to); return Status::Ok();
      case Re::kSet:
        for (const auto& [lo, hi] : Restrict(r.set)) nfa.AddCodePoints(from, to, lo, hi);
        return Status::Ok();
      case Re::kConcat: {
        if (r.kids.empty()) {
          nfa.AddEpsilon(from, to);
          return Status::Ok();
        }
        int32_t s = from;
        for (size_t k = 0; k < r.kids.size(); ++k) {
          const int32_t t = k + 1 == r.kids.size() ? to : nfa.AddState();
          RETURN_IF_ERROR(Build(r.kids[k], s, t));
          s = t;
        }
        return Status::Ok();
      }
      case Re::kAlt:
        for (const Re& k : r.kids) {
          const int32_t s = nfa.AddState(), t = nfa.AddState();
          nfa.AddEpsilon(from, s);
          nfa.AddEpsilon(t, to);
          RETURN_IF_ERROR(Build(k, s, t));
        }
        return Status::Ok();
      case Re::kRepeat: {
        int32_t s = nfa.AddState();
        nfa.AddEpsilon(from, s);
        for (int k = 0; k < r.min; ++k) {
          const int32_t t = nfa.AddState();
          RETURN_IF_ERROR(Build(r.kids[0], s, t));
          s = t;
        }
        if (r.max < 0) {  // a loop on its own state, entered and left by epsilon
          const int32_t loop = nfa.AddState();
          nfa.AddEpsilon(s, loop);
          RETURN_IF_ERROR(Build(r.kids[0], loop, loop));
          nfa.AddEpsilon(loop, to);
          return Status::Ok();
        }
        for (int k = r.min; k < r.max; ++k) {
          const int32_t t = nfa.AddState();
          nfa.AddEpsilon(s, to);
          RETURN_IF_ERROR(Build(r.kids[0], s, t));
          s = t;
        }
        nfa.AddEpsilon(s, to);
        return Status::Ok();
      }
    }
    return Status::Ok();
  }

  ByteNfa nfa;
};

}  // namespace

Expected<ByteDfa> CompileRegex(const std::string& pattern, RegexMatch match, size_t max_states) {
  std::vector<Re> alternatives;
  std::vector<std::pair<bool, bool>> anchors;
  RETURN_IF_ERROR(Parser(pattern).Parse(&alternatives, &anchors));
  NfaBuilder b;
  const int32_t start = b.nfa.AddState(), accept = b.nfa.AddState();
  Re any;
  any.kind = Re::kRepeat;
  any.kids.emplace_back();
  any.kids[0].kind = Re::kSet;
  any.kids[0].set = {{0, 0x10FFFF}};
  for (size_t k = 0; k < alternatives.size(); ++k) {
    Re seq;
    seq.kind = Re::kConcat;
    const bool search = match == RegexMatch::kSearch;
    if (search && !anchors[k].first) seq.kids.push_back(any);
    seq.kids.push_back(std::move(alternatives[k]));
    if (search && !anchors[k].second) seq.kids.push_back(any);
    const int32_t s = b.nfa.AddState();
    b.nfa.AddEpsilon(start, s);
    RETURN_IF_ERROR(b.Build(seq, s, accept));
  }
  return Determinize(b.nfa, start, accept, max_states);
}

}  // namespace anymoe
