// Oniguruma -> PCRE2 pattern translation (see regex_translate.h). Every class
// (a bracket with its nesting, negation and && worked out, or a \p / \s
// outside one) is first computed as the exact set of code points the reference
// matches, then written as one PCRE2 bracket: the general categories PCRE2
// matches entirely inside the set (or, negated, entirely outside it) by name,
// the rest as explicit ranges, whichever of the two is shorter. One bracket is
// one atom, so quantifiers and the JIT stack behave as for the original class.
// What PCRE2 matches for a category is probed once per process (a scan over
// every scalar value), not assumed from its Unicode version.
#include "tokenizer/regex_translate.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "tokenizer/unicode_category.h"
#include "tokenizer/unicode_class.h"

namespace anymoe {
namespace {

using Ranges = std::vector<CodepointRange>;

Ranges Union(Ranges a, const Ranges& b) {
  a.insert(a.end(), b.begin(), b.end());
  NormalizeRanges(&a);
  return a;
}

Ranges Intersect(const Ranges& a, const Ranges& b) {
  Ranges out;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const uint32_t first = std::max(a[i].first, b[j].first);
    const uint32_t last = std::min(a[i].last, b[j].last);
    if (first <= last) out.push_back({first, last});
    (a[i].last < b[j].last) ? ++i : ++j;
  }
  return out;
}

Ranges Minus(const Ranges& a, const Ranges& b) { return Intersect(a, ComplementRanges(b)); }

std::string Hex(uint32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "\\x{%X}", cp);
  return buf;
}

std::string RangesText(const Ranges& ranges) {
  std::string out;
  for (const CodepointRange& r : ranges) {
    out += Hex(r.first);
    if (r.last != r.first) out += "-" + Hex(r.last);
  }
  return out;
}

// Every Unicode scalar value in order, as UTF-8: the text PCRE2's classes are probed on.
const std::string& AllScalarValues() {
  static const std::string text = [] {
    std::string t;
    for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp) {
      if (cp < 0xD800 || cp > 0xDFFF) AppendUtf8(cp, &t);
    }
    return t;
  }();
  return text;
}

uint32_t CodepointAt(const std::string& text, size_t offset) {
  uint32_t cp = 0;
  size_t len = 0;
  DecodeUtf8At(text, offset, &cp, &len);
  return cp;
}

// The code points PCRE2 itself matches with the class body `native` ("\p{L}", "\s").
Ranges ProbeNative(const std::string& native) {
  static std::mutex mu;
  static std::map<std::string, Ranges> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(native); it != cache.end()) return it->second;
  const std::string pattern = "[" + native + "]+";
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error, &error_offset, nullptr);
  Ranges out;
  if (code == nullptr) return out;  // only called with class bodies we wrote
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  pcre2_match_data* match = pcre2_match_data_create_from_pattern(code, nullptr);
  const std::string& text = AllScalarValues();
  size_t at = 0;
  while (at < text.size() &&
         pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), at,
                     PCRE2_NO_UTF_CHECK, match, nullptr) >= 0) {
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match);
    size_t last = ov[1] - 1;
    while ((static_cast<uint8_t>(text[last]) & 0xC0) == 0x80) --last;
    out.push_back({CodepointAt(text, ov[0]), CodepointAt(text, last)});
    at = ov[1];
  }
  pcre2_match_data_free(match);
  pcre2_code_free(code);
  cache.emplace(native, out);
  return out;
}

// A PCRE2 class name PCRE2 can match natively, what the reference means by it,
// and what PCRE2 matches for it.
struct NativeClass {
  std::string text;
  Ranges truth;
  Ranges pcre2;
};

const std::vector<NativeClass>& NativeClasses() {
  static const std::vector<NativeClass> classes = [] {
    std::vector<NativeClass> out;
    for (std::string_view name :
         {"Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe",
          "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Co", "Han"}) {
      NativeClass c;
      // PCRE2's bare \p{Han} is the Script_Extensions property; sc: is Script.
      c.text = name == "Han" ? "\\p{sc:Han}" : "\\p{" + std::string(name) + "}";
      c.truth = *PropertyRanges(name);
      c.pcre2 = ProbeNative(c.text);
      out.push_back(std::move(c));
    }
    return out;
  }();
  return classes;
}

// The body of a bracket matching `target`: native classes PCRE2 matches wholly
// inside it, then explicit ranges for the rest. *cost is the range count.
std::string BracketBody(const Ranges& target, size_t* cost) {
  std::string natives;
  Ranges covered;
  for (const NativeClass& c : NativeClasses()) {
    if (c.pcre2.empty() || !Minus(c.truth, target).empty() || !Minus(c.pcre2, target).empty()) {
      continue;
    }
    natives += c.text;
    covered = Union(std::move(covered), c.pcre2);
  }
  const Ranges rest = Minus(target, covered);
  *cost = rest.size();
  return natives + RangesText(rest);
}

// One PCRE2 atom matching exactly the code points in `truth`.
std::string Emit(const Ranges& truth) {
  const Ranges complement = ComplementRanges(truth);
  if (truth.empty()) return "(?!)";
  if (complement.empty()) return "(?s:.)";
  size_t positive_cost = 0, negated_cost = 0;
  const std::string positive = BracketBody(truth, &positive_cost);
  const std::string negated = BracketBody(complement, &negated_cost);
  return positive_cost <= negated_cost ? "[" + positive + "]" : "[^" + negated + "]";
}

class Translator {
 public:
  explicit Translator(std::string_view pattern) : p_(pattern) {}

  Expected<std::string> Run() {
    while (i_ < p_.size()) {
      const char c = p_[i_];
      if (c == '[') {
        ASSIGN_OR_RETURN(Ranges set, ParseBracket());
        out_ += Emit(set);
      } else if (c == '\\') {
        RETURN_IF_ERROR(EscapeOutsideClass());
      } else {
        out_ += c;
        ++i_;
      }
    }
    return out_;
  }

 private:
  Status Fail(const std::string& what) const {
    return Status::Error("pre-tokenizer regex: " + what + " at byte " + std::to_string(i_),
                         ErrorKind::kInvalidArgument, "tokenizer_regex_rejected");
  }
  bool At(std::string_view s) const { return p_.substr(i_, s.size()) == s; }

  // \p{Name}, \p{^Name}, \P{Name}, \pL at p_[i_] == 'p' or 'P'.
  Expected<Ranges> Property() {
    bool negated = p_[i_] == 'P';
    ++i_;
    std::string name;
    if (i_ < p_.size() && p_[i_] == '{') {
      const size_t close = p_.find('}', i_);
      if (close == std::string_view::npos) return Fail("unterminated \\p{");
      name = std::string(p_.substr(i_ + 1, close - i_ - 1));
      i_ = close + 1;
      if (!name.empty() && name[0] == '^') {
        negated = !negated;
        name.erase(0, 1);
      }
    } else if (i_ < p_.size()) {
      name = std::string(1, p_[i_++]);
    } else {
      return Fail("\\p without a name");
    }
    auto truth = PropertyRanges(name);
    if (!truth.ok()) return Fail(truth.status().message());
    return negated ? ComplementRanges(*truth) : *truth;
  }

  // \s \S \d \D \w \W \h \H at p_[i_]; nullopt if p_[i_] is none of them.
  Expected<std::optional<Ranges>> ShorthandClass() {
    const char c = p_[i_];
    Ranges truth;
    switch (c) {
      case 's':
      case 'S':
        truth = *PropertyRanges("White_Space");
        break;
      case 'd':
      case 'D':
        truth = *PropertyRanges("Nd");
        break;
      case 'w':
      case 'W':
        truth = *PropertyRanges("Word");
        break;
      case 'h':
      case 'H':
        truth = {{'0', '9'}, {'A', 'F'}, {'a', 'f'}};
        break;  // Ruby: hex digit
      default:
        return std::optional<Ranges>();
    }
    ++i_;
    const bool negated = c >= 'A' && c <= 'Z';
    return std::optional<Ranges>(negated ? ComplementRanges(truth) : truth);
  }

  // A literal character at p_[i_] (escaped or not) as a code point.
  Expected<uint32_t> LiteralChar() {
    if (p_[i_] != '\\') return Utf8Char();
    if (++i_ >= p_.size()) return Fail("pattern ends in a backslash");
    const char c = p_[i_++];
    switch (c) {
      case 'n':
        return uint32_t{'\n'};
      case 'r':
        return uint32_t{'\r'};
      case 't':
        return uint32_t{'\t'};
      case 'f':
        return uint32_t{'\f'};
      case 'v':
        return uint32_t{'\v'};
      case 'a':
        return uint32_t{'\a'};
      case 'e':
        return uint32_t{0x1B};
      case 'x':
        return HexDigits(i_ < p_.size() && p_[i_] == '{' ? 0 : 2);
      case 'u':
        return HexDigits(4);
      default:
        if (std::isalnum(static_cast<unsigned char>(c))) {
          return Fail(std::string("unsupported escape \\") + c + " in a class");
        }
        --i_;  // an escaped punctuation or non-ASCII character stands for itself
        return Utf8Char();
    }
  }
  Expected<uint32_t> Utf8Char() {
    uint32_t cp = 0;
    size_t len = 0;
    if (DecodeUtf8At(p_, i_, &cp, &len) != Utf8Step::kValid) return Fail("invalid UTF-8");
    i_ += len;
    return cp;
  }
  // `count` hex digits, or {H..} when count is 0.
  Expected<uint32_t> HexDigits(size_t count) {
    const bool braced = count == 0;
    if (braced) ++i_;
    uint32_t cp = 0;
    size_t n = 0;
    while (i_ < p_.size() && (braced || n < count) &&
           std::isxdigit(static_cast<unsigned char>(p_[i_]))) {
      const char d = p_[i_];
      cp = cp * 16 + uint32_t(d <= '9' ? d - '0' : (d | 0x20) - 'a' + 10);
      ++i_;
      if (++n > 6) return Fail("hex escape too long");
    }
    if (braced && (i_ >= p_.size() || p_[i_++] != '}')) return Fail("unterminated \\x{");
    if (n == 0 || (!braced && n != count)) return Fail("malformed hex escape");
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      return Fail("hex escape is no scalar value");
    return cp;
  }

  // The union of a class's items up to "&&" or the closing ']'.
  Expected<Ranges> ParseItems(bool first_in_class) {
    Ranges set;
    bool first = first_in_class;
    while (true) {
      if (i_ >= p_.size()) return Fail("unterminated character class");
      const char c = p_[i_];
      if ((c == ']' && !first) || At("&&")) return set;
      first = false;
      if (c == '[') {
        if (At("[:")) return Fail("POSIX bracket classes are not supported");
        ASSIGN_OR_RETURN(Ranges nested, ParseBracket());
        set = Union(std::move(set), nested);
        continue;
      }
      if (c == '\\' && i_ + 1 < p_.size()) {
        ++i_;
        if (p_[i_] == 'p' || p_[i_] == 'P') {
          ASSIGN_OR_RETURN(Ranges prop, Property());
          set = Union(std::move(set), prop);
          continue;
        }
        ASSIGN_OR_RETURN(std::optional<Ranges> shorthand, ShorthandClass());
        if (shorthand) {
          set = Union(std::move(set), *shorthand);
          continue;
        }
        --i_;  // a literal escape: LiteralChar reads it from the backslash
      }
      ASSIGN_OR_RETURN(uint32_t lo, LiteralChar());
      uint32_t hi = lo;
      if (At("-") && i_ + 1 < p_.size() && p_[i_ + 1] != ']' && !At("-&&")) {
        ++i_;
        if (p_[i_] == '[') return Fail("a class cannot end a range");
        ASSIGN_OR_RETURN(hi, LiteralChar());
        if (hi < lo) return Fail("range out of order");
      }
      set = Union(std::move(set), Ranges{{lo, hi}});
    }
  }

  // The code points of the bracket class at p_[i_] == '[', with Oniguruma's
  // nesting, negation and && (intersection, binding looser than union).
  Expected<Ranges> ParseBracket() {
    ++i_;
    const bool negated = i_ < p_.size() && p_[i_] == '^';
    if (negated) ++i_;
    ASSIGN_OR_RETURN(Ranges set, ParseItems(true));
    while (At("&&")) {
      i_ += 2;
      ASSIGN_OR_RETURN(Ranges operand, ParseItems(false));
      set = Intersect(set, operand);
    }
    ++i_;  // ']'
    return negated ? ComplementRanges(set) : set;
  }

  Status EscapeOutsideClass() {
    if (i_ + 1 >= p_.size()) return Fail("pattern ends in a backslash");
    const char e = p_[++i_];
    if (e == 'p' || e == 'P') {
      ASSIGN_OR_RETURN(Ranges prop, Property());
      out_ += Emit(prop);
      return Status::Ok();
    }
    ASSIGN_OR_RETURN(std::optional<Ranges> shorthand, ShorthandClass());
    if (shorthand) {
      out_ += Emit(*shorthand);
      return Status::Ok();
    }
    ++i_;
    switch (e) {
      case 'v':
        out_ += "\\x{B}";
        return Status::Ok();
      case 'u': {
        ASSIGN_OR_RETURN(uint32_t cp, HexDigits(4));
        out_ += Hex(cp);
        return Status::Ok();
      }
      default:  // same meaning in both engines (\n, \b, \A, \z, \1, \., \\ ...)
        out_ += '\\';
        out_ += e;
        return Status::Ok();
    }
  }

  std::string_view p_;
  size_t i_ = 0;
  std::string out_;
};

}  // namespace

Expected<std::string> TranslateOnigurumaPattern(std::string_view pattern) {
  if (pattern.size() > kMaxPreTokenizerPatternBytes) {
    return Status::Error("pre-tokenizer regex of " + std::to_string(pattern.size()) +
                             " bytes is over the limit of " +
                             std::to_string(kMaxPreTokenizerPatternBytes),
                         ErrorKind::kInvalidArgument, "tokenizer_regex_rejected");
  }
  return Translator(pattern).Run();
}

}  // namespace anymoe
