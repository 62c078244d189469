// Range automata (json_number_range.h). Magnitudes are compared digit by
// digit: for a bound B = b1 b2 ... bk, "x >= B" among texts of one length is
// "[b1+1-9] then anything, or b1 then x' >= b2...bk", and integer parts of
// different lengths compare by length. The regular expression this writes has
// O(digits) alternatives and is compiled by json_regex.
#include "chat/json_number_range.h"

#include <algorithm>
#include <charconv>
#include <vector>

#include "chat/json_regex.h"

namespace anymoe {
namespace {

constexpr int kMaxDigits = 15;
constexpr int64_t kMaxInteger = 999999999999999;  // 15 digits
constexpr int64_t kMaxMultipleOf = 2048;

struct Decimal {
  bool negative = false;
  std::string whole = "0";  // no leading zeros
  std::string frac;         // no trailing zeros
};

Decimal ParseDecimal(const std::string& text) {
  Decimal d;
  size_t i = 0;
  if (i < text.size() && text[i] == '-') d.negative = true, ++i;
  const size_t dot = text.find('.', i);
  d.whole = text.substr(i, dot == std::string::npos ? std::string::npos : dot - i);
  if (dot != std::string::npos) d.frac = text.substr(dot + 1);
  while (d.whole.size() > 1 && d.whole[0] == '0') d.whole.erase(0, 1);
  if (d.whole.empty()) d.whole = "0";
  while (!d.frac.empty() && d.frac.back() == '0') d.frac.pop_back();
  if (d.whole == "0" && d.frac.empty()) d.negative = false;
  return d;
}

std::string Group(const std::vector<std::string>& alts) {
  std::string out = "(?:";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? "|" : "") + alts[i];
  return out + ")";
}

std::string Digits(int lo, int hi) {
  if (lo == hi) return std::string(1, char('0' + lo));
  return std::string("[") + char('0' + lo) + "-" + char('0' + hi) + "]";
}

std::string AnyDigits(int n) { return n <= 0 ? "" : "[0-9]{" + std::to_string(n) + "}"; }
std::string UpTo(int n) { return n <= 0 ? "" : "[0-9]{0," + std::to_string(n) + "}"; }

// Texts of the same length between a and b (a <= b, digit strings).
std::string SameLength(const std::string& a, const std::string& b) {
  if (a.empty()) return "";
  if (a[0] == b[0]) return std::string(1, a[0]) + SameLength(a.substr(1), b.substr(1));
  const std::string ra = a.substr(1), rb = b.substr(1);
  const bool a_zeros = ra.find_first_not_of('0') == std::string::npos;
  const bool b_nines = rb.find_first_not_of('9') == std::string::npos;
  std::vector<std::string> alts;
  int lo = a[0] - '0', hi = b[0] - '0';
  if (!a_zeros) alts.push_back(std::string(1, a[0]) + SameLength(ra, std::string(ra.size(), '9'))), ++lo;
  if (!b_nines) --hi;
  if (lo <= hi) alts.push_back(Digits(lo, hi) + AnyDigits(int(ra.size())));
  if (!b_nines) alts.push_back(std::string(1, b[0]) + SameLength(std::string(rb.size(), '0'), rb));
  return alts.size() == 1 ? alts[0] : Group(alts);
}

// Canonical decimal texts of the integers in [lo, hi], 0 <= lo <= hi.
std::string MagnitudeRange(int64_t lo, int64_t hi) {
  std::vector<std::string> alts;
  const std::string a = std::to_string(lo), b = std::to_string(hi);
  int64_t first = lo;
  for (size_t len = a.size(); len <= b.size(); ++len) {
    int64_t top = 9;
    for (size_t k = 1; k < len; ++k) top = top * 10 + 9;
    const int64_t last = std::min(hi, top);
    alts.push_back(SameLength(std::to_string(first), std::to_string(last)));
    first = top + 1;
  }
  return Group(alts);
}

bool AllZero(const std::string& d) { return d.find_first_not_of('0') == std::string::npos; }
int Head(const std::string& d) { return d.empty() ? 0 : d[0] - '0'; }
std::string Tail(const std::string& d) { return d.empty() ? d : d.substr(1); }

enum class Cmp { kGe, kGt, kLe, kLt };

// Digit strings s of at most m digits with 0.s `cmp` 0.d; each alternative a
// regex, "" the empty string; no alternatives: none.
std::vector<std::string> Fraction(Cmp cmp, const std::string& d, int m) {
  const bool zero = AllZero(d);
  std::vector<std::string> alts;
  const auto recurse = [&](int first_lo, int first_hi) {
    if (first_lo <= first_hi && m > 0) alts.push_back(Digits(first_lo, first_hi) + UpTo(m - 1));
    if (m > 0) {
      for (const std::string& r : Fraction(cmp, Tail(d), m - 1)) alts.push_back(std::string(1, char('0' + Head(d))) + r);
    }
  };
  switch (cmp) {
    case Cmp::kGe:
      if (zero) return {UpTo(m)};
      recurse(Head(d) + 1, 9);
      break;
    case Cmp::kGt: recurse(Head(d) + 1, 9); break;
    case Cmp::kLe:
      if (zero) return {m > 0 ? "0{0," + std::to_string(m) + "}" : ""};
      alts.push_back("");
      recurse(0, Head(d) - 1);
      break;
    case Cmp::kLt:
      if (zero) return {};
      alts.push_back("");
      recurse(0, Head(d) - 1);
      break;
  }
  return alts;
}

// "\.s" for the fractions s above, or nothing (the empty fraction included
// when "" is among them; "1." forms are removed by the grammar intersection).
std::string FractionText(Cmp cmp, const std::string& d, int m, bool* none) {
  const std::vector<std::string> alts = Fraction(cmp, d, m);
  *none = alts.empty();
  if (alts.empty()) return "";
  // The empty fraction: "" itself, or an alternative of up to m digits ("[0-9]{0,m}", "0{0,m}").
  const bool empty_ok = std::any_of(alts.begin(), alts.end(), [](const std::string& a) {
    return a.empty() || (a.find('{') == a.rfind('{') && (a.rfind("[0-9]{0,", 0) == 0 || a.rfind("0{0,", 0) == 0));
  });
  return "(?:\\." + Group(alts) + ")" + (empty_ok ? "?" : "");
}

struct Limits {
  int whole_digits, frac_digits;
};

// Magnitudes (no sign) m with m `cmp` b; b.whole has at most whole_digits digits.
std::string Magnitude(Cmp cmp, const Decimal& b, const Limits& lim) {
  const int64_t whole = std::stoll(b.whole);
  int64_t top = 0;
  for (int k = 0; k < lim.whole_digits; ++k) top = top * 10 + 9;
  const std::string any_frac = "(?:\\.[0-9]{1," + std::to_string(lim.frac_digits) + "})?";
  std::vector<std::string> alts;
  const bool lower = cmp == Cmp::kGe || cmp == Cmp::kGt;
  if (lower && whole < top) alts.push_back(MagnitudeRange(whole + 1, top) + any_frac);
  if (!lower && whole > 0) alts.push_back(MagnitudeRange(0, whole - 1) + any_frac);
  bool none;
  const std::string frac = FractionText(cmp, b.frac, lim.frac_digits, &none);
  if (!none) alts.push_back(b.whole + frac);
  return alts.empty() ? "\\x00" : Group(alts);  // \x00: never generated
}

int64_t Pow10(int n) {
  int64_t v = 1;
  while (n-- > 0) v *= 10;
  return v;
}

// Integer bound after rounding into the integers (saturated past 16 digits).
int64_t RoundBound(const Decimal& d, bool lower, bool exclusive) {
  const int64_t whole = d.whole.size() > 16 ? Pow10(16) : std::stoll(d.whole);
  const bool frac = !d.frac.empty();
  const int64_t floor = d.negative ? -whole - (frac ? 1 : 0) : whole;
  const int64_t ceil = d.negative ? -whole : whole + (frac ? 1 : 0);
  if (lower) return exclusive ? floor + 1 : ceil;
  return exclusive ? ceil - 1 : floor;
}

Expected<ByteDfa> MultipleOfDfa(int64_t k) {
  // 0: start, 1: after '-', 2 + r: digits read so far are r mod k.
  const size_t n = size_t(k) + 2;
  std::vector<int32_t> next(n * 256, ByteDfa::kNone);
  for (size_t s = 0; s < n; ++s) {
    if (s == 0) next['-'] = 1;
    for (int d = 0; d < 10; ++d) {
      const int64_t r = s < 2 ? d % k : (10 * int64_t(s - 2) + d) % k;
      next[s * 256 + size_t('0' + d)] = int32_t(2 + r);
    }
  }
  ByteDfa dfa;
  dfa.next = std::move(next);
  dfa.accepting.assign(n, 0);
  dfa.accepting[2] = 1;
  dfa.distance.assign(n, 1);  // not used before intersection (which recomputes it)
  dfa.has_next.assign(n, 1);
  return dfa;
}

}  // namespace

std::string DecimalText(double value) {
  char buf[512];
  const auto r = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::fixed);
  if (r.ec != std::errc()) return value < 0 ? "-1" + std::string(400, '0') : "1" + std::string(400, '0');
  return std::string(buf, r.ptr);
}

Expected<ByteDfa> IntegerRangeDfa(const NumberBounds& b, size_t max_states) {
  int64_t lo = -kMaxInteger, hi = kMaxInteger;
  if (!b.minimum.empty()) lo = std::max(lo, RoundBound(ParseDecimal(b.minimum), true, b.exclusive_minimum));
  if (!b.maximum.empty()) hi = std::min(hi, RoundBound(ParseDecimal(b.maximum), false, b.exclusive_maximum));
  if (lo > kMaxInteger || hi < -kMaxInteger) return Status::Error("no integer of at most 15 digits is in range");
  if (lo > hi) return Status::Error("no integer is in range");
  std::string re;
  if (lo >= 0) re = MagnitudeRange(lo, hi);
  else if (hi < 0) re = "-" + MagnitudeRange(-hi, -lo);
  else re = Group({"-" + MagnitudeRange(1, -lo), MagnitudeRange(0, hi)});
  ASSIGN_OR_RETURN(ByteDfa dfa, CompileRegex(re, RegexMatch::kWhole, max_states));
  if (b.multiple_of == 0) return dfa;
  if (b.multiple_of < 0 || b.multiple_of > kMaxMultipleOf) {
    return Status::Error("multipleOf above " + std::to_string(kMaxMultipleOf) + " is not supported");
  }
  ASSIGN_OR_RETURN(ByteDfa mult, MultipleOfDfa(b.multiple_of));
  auto both = Intersect(dfa, mult, max_states);
  if (!both.ok()) return Status::Error("no multiple of " + std::to_string(b.multiple_of) + " is in range: " + both.status().message());
  return both;
}

Expected<ByteDfa> NumberRangeDfa(const NumberBounds& b, size_t max_states) {
  const Decimal lo = ParseDecimal(b.minimum.empty() ? "0" : b.minimum);
  const Decimal hi = ParseDecimal(b.maximum.empty() ? "0" : b.maximum);
  size_t frac = 6;
  if (!b.minimum.empty()) frac = std::max(frac, lo.frac.size());
  if (!b.maximum.empty()) frac = std::max(frac, hi.frac.size());
  if (frac > 12) return Status::Error("a bound with more than 12 fraction digits is not supported");
  const Limits lim{kMaxDigits - int(frac), int(frac)};
  const std::string whole = "(?:0|[1-9][0-9]{0," + std::to_string(lim.whole_digits - 1) + "})";
  const std::string grammar = "-?" + whole + "(?:\\.[0-9]{1," + std::to_string(lim.frac_digits) + "})?";
  ASSIGN_OR_RETURN(ByteDfa dfa, CompileRegex(grammar, RegexMatch::kWhole, max_states));
  const std::string positive = "(?:" + whole + "(?:\\.[0-9]+)?)";  // any magnitude, zero included
  const auto side = [&](const Decimal& d, bool lower, bool exclusive) -> Expected<ByteDfa> {
    const bool too_long = int(d.whole.size()) > lim.whole_digits;
    std::string re;
    if (lower) {
      const Cmp cmp = exclusive ? Cmp::kGt : Cmp::kGe;
      if (d.negative) {  // all of x >= 0, and -m with m <= |d|
        re = too_long ? "-?" + positive : Group({positive, "-" + Magnitude(exclusive ? Cmp::kLt : Cmp::kLe, d, lim)});
      } else {
        if (too_long) return Status::Error("no number of at most 15 digits is above " + b.minimum);
        re = Magnitude(cmp, d, lim);
      }
    } else {
      const Cmp cmp = exclusive ? Cmp::kLt : Cmp::kLe;
      // Negative values: '-' then a magnitude above zero (so never "-0").
      const std::string negative = "-" + Magnitude(Cmp::kGt, Decimal{}, lim);
      if (!d.negative) {
        re = too_long ? "-?" + positive : Group({negative, Magnitude(cmp, d, lim)});
      } else {
        if (too_long) return Status::Error("no number of at most 15 digits is below " + b.maximum);
        re = "-" + Magnitude(exclusive ? Cmp::kGt : Cmp::kGe, d, lim);
      }
    }
    return CompileRegex(re, RegexMatch::kWhole, max_states);
  };
  if (!b.minimum.empty()) {
    ASSIGN_OR_RETURN(ByteDfa low, side(lo, true, b.exclusive_minimum));
    auto both = Intersect(dfa, low, max_states);
    if (!both.ok()) return Status::Error("no number is in range: " + both.status().message());
    dfa = std::move(*both);
  }
  if (!b.maximum.empty()) {
    ASSIGN_OR_RETURN(ByteDfa high, side(hi, false, b.exclusive_maximum));
    auto both = Intersect(dfa, high, max_states);
    if (!both.ok()) return Status::Error("no number is in range: " + both.status().message());
    dfa = std::move(*both);
  }
  return dfa;
}

}  // namespace anymoe
