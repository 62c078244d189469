// Hand-written scanners for the GPT-2, Llama-3, Qwen2 and Kimi K2 split regexes.
// Each Match* function returns where the regex's leftmost match starting at `i`
// ends, trying the alternatives in the regex's order; greedy runs are loops, and
// the one lookahead, \s+(?!\S), becomes "give back the last whitespace character".
#include "tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <span>
#include <string>

#include "tokenizer/unicode_category.h"
#include "tokenizer/unicode_class.h"

namespace anymoe {
namespace {

using Chars = std::span<const TextChar>;

bool Is(const TextChar& c, CharClass cls) { return c.cls == cls; }
bool IsCrLf(const TextChar& c) { return c.cp == '\r' || c.cp == '\n'; }

size_t RunEnd(Chars c, size_t i, CharClass cls) {
  while (i < c.size() && c[i].cls == cls) ++i;
  return i;
}

// Oniguruma's case-insensitive match of one contraction letter: ASCII case plus
// U+017F LATIN SMALL LETTER LONG S, which case-folds to 's'.
bool LetterIs(uint32_t cp, char lower, bool ignore_case) {
  if (cp == static_cast<uint32_t>(lower)) return true;
  if (!ignore_case) return false;
  if (cp == static_cast<uint32_t>(lower - 'a' + 'A')) return true;
  return lower == 's' && cp == 0x17F;
}

// Length in characters of 's|'t|'re|'ve|'m|'ll|'d at c[i] (0 if none).
size_t ContractionLength(Chars c, size_t i, bool ignore_case) {
  if (c[i].cp != '\'' || i + 1 >= c.size()) return 0;
  const uint32_t a = c[i + 1].cp;
  for (char one : {'s', 't'}) {
    if (LetterIs(a, one, ignore_case)) return 2;
  }
  const uint32_t b = i + 2 < c.size() ? c[i + 2].cp : 0;
  if (LetterIs(a, 'r', ignore_case) && LetterIs(b, 'e', ignore_case)) return 3;
  if (LetterIs(a, 'v', ignore_case) && LetterIs(b, 'e', ignore_case)) return 3;
  if (LetterIs(a, 'm', ignore_case)) return 2;
  if (LetterIs(a, 'l', ignore_case) && LetterIs(b, 'l', ignore_case)) return 3;
  if (LetterIs(a, 'd', ignore_case)) return 2;
  return 0;
}

// \s+(?!\S)|\s+ at a whitespace character c[i].
size_t MatchTrailingWhitespace(Chars c, size_t i) {
  const size_t end = RunEnd(c, i, CharClass::kWhitespace);
  if (end == c.size() || end - i == 1) return end;
  return end - 1;  // leave one space to prefix the next word
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
size_t MatchGpt2(Chars c, size_t i) {
  if (size_t n = ContractionLength(c, i, /*ignore_case=*/false)) return i + n;
  const size_t k = (c[i].cp == ' ' && i + 1 < c.size()) ? i + 1 : i;
  if (!Is(c[k], CharClass::kWhitespace)) return RunEnd(c, k, c[k].cls);
  return MatchTrailingWhitespace(c, i);
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}|
//  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
size_t MatchLlama3(Chars c, size_t i, size_t max_digits) {
  if (size_t n = ContractionLength(c, i, /*ignore_case=*/true)) return i + n;
  const TextChar& ch = c[i];
  if (Is(ch, CharClass::kLetter)) return RunEnd(c, i, CharClass::kLetter);
  const bool has_next = i + 1 < c.size();
  if (!IsCrLf(ch) && !Is(ch, CharClass::kNumber) && has_next && Is(c[i + 1], CharClass::kLetter)) {
    return RunEnd(c, i + 1, CharClass::kLetter);
  }
  if (Is(ch, CharClass::kNumber)) {
    size_t end = i;
    while (end < c.size() && end - i < max_digits && Is(c[end], CharClass::kNumber)) ++end;
    return end;
  }
  const size_t k = (ch.cp == ' ' && has_next && Is(c[i + 1], CharClass::kOther)) ? i + 1 : i;
  if (Is(c[k], CharClass::kOther)) {
    size_t end = RunEnd(c, k, CharClass::kOther);
    while (end < c.size() && IsCrLf(c[end])) ++end;
    return end;
  }
  // c[i] is whitespace. \s*[\r\n]+ ends after the run's last CR/LF, if it has one.
  const size_t run_end = RunEnd(c, i, CharClass::kWhitespace);
  for (size_t j = run_end; j > i; --j) {
    if (IsCrLf(c[j - 1])) return j;
  }
  return MatchTrailingWhitespace(c, i);
}

// Kimi K2's classes of one character, as Oniguruma / tiktoken see them (the
// tables the regex translator uses): Han script, and its two letter classes,
// upper = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]], lower =
// [\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]. PCRE2 has no class subtraction, so
// the regex spells each as ~900 explicit ranges, which its JIT checks one
// after another: this scanner is why the Kimi pattern is not 6x slower.
enum KimiFlags : uint8_t { kHan = 1, kUpper = 2, kLower = 4 };

bool IsHanScript(uint32_t cp) {
  static const std::vector<CodepointRange> han = [] {
    auto r = PropertyRanges("Han");
    return r.ok() ? std::move(r).value() : std::vector<CodepointRange>();
  }();
  auto it = std::upper_bound(han.begin(), han.end(), cp,
                             [](uint32_t v, const CodepointRange& r) { return v < r.first; });
  return it != han.begin() && cp <= (it - 1)->last;
}

uint8_t KimiFlagsOf(const TextChar& ch) {
  if (ch.cp < 0x80) {  // ASCII: only letters have a flag
    if (ch.cp >= 'A' && ch.cp <= 'Z') return kUpper;
    if (ch.cp >= 'a' && ch.cp <= 'z') return kLower;
    return 0;
  }
  if (ch.cp == kInvalidCodepoint) return 0;  // matched as U+FFFD, a symbol
  if (IsHanScript(ch.cp)) return kHan;
  switch (GeneralCategoryOf(ch.cp)) {
    case GeneralCategory::kLu:
    case GeneralCategory::kLt:
      return kUpper;
    case GeneralCategory::kLl:
      return kLower;
    case GeneralCategory::kLm:
    case GeneralCategory::kLo:
    case GeneralCategory::kMn:
    case GeneralCategory::kMc:
    case GeneralCategory::kMe:
      return kUpper | kLower;
    default:
      return 0;
  }
}

class KimiMatcher {
 public:
  KimiMatcher(Chars c, const std::vector<uint8_t>& flags) : c_(c), f_(flags) {}

  size_t operator()(Chars, size_t i) const {
    const size_t n = c_.size();
    if (f_[i] & kHan) return RunWhile(i, kHan);  // [\p{Han}]+
    // [^\r\n\p{L}\p{N}]? first with the character, then without it.
    const bool prefix = !IsCrLf(c_[i]) && !Is(c_[i], CharClass::kLetter) &&
                        !Is(c_[i], CharClass::kNumber) && i + 1 < n;
    for (size_t s : {prefix ? i + 1 : i, i}) {  // upper* lower+ contraction?
      if (size_t end = UpperThenLower(s)) return WithContraction(end);
    }
    for (size_t s : {prefix ? i + 1 : i, i}) {  // upper+ lower* contraction?
      if (s < n && (f_[s] & kUpper)) return WithContraction(RunWhile(RunWhile(s, kUpper), kLower));
    }
    if (Is(c_[i], CharClass::kNumber)) {  // \p{N}{1,3}
      size_t end = i;
      while (end < n && end - i < 3 && Is(c_[end], CharClass::kNumber)) ++end;
      return end;
    }
    //  ?[^\s\p{L}\p{N}]+[\r\n]*
    const size_t k = (c_[i].cp == ' ' && i + 1 < n && Is(c_[i + 1], CharClass::kOther)) ? i + 1 : i;
    if (Is(c_[k], CharClass::kOther)) {
      size_t end = RunEnd(c_, k, CharClass::kOther);
      while (end < n && IsCrLf(c_[end])) ++end;
      return end;
    }
    // c[i] is whitespace: \s*[\r\n]+ ends after the run's last CR/LF, if any.
    const size_t run_end = RunEnd(c_, i, CharClass::kWhitespace);
    for (size_t j = run_end; j > i; --j) {
      if (IsCrLf(c_[j - 1])) return j;
    }
    return MatchTrailingWhitespace(c_, i);
  }

 private:
  size_t RunWhile(size_t i, uint8_t flag) const {
    while (i < c_.size() && (f_[i] & flag)) ++i;
    return i;
  }
  // Where upper*lower+ starting at s ends, or 0 when it cannot match: the
  // greedy upper run, then a lower run; if none follows, the regex gives back
  // upper characters until the last one that is also lower (Lm, Lo, M) ends
  // the match. Each character is looked at a bounded number of times over
  // the whole text: a run given back is matched next by upper+lower*.
  size_t UpperThenLower(size_t s) const {
    const size_t j = RunWhile(s, kUpper);
    if (j < c_.size() && (f_[j] & kLower)) return RunWhile(j, kLower);
    for (size_t t = j; t > s; --t) {
      if (f_[t - 1] & kLower) return t;
    }
    return 0;
  }
  size_t WithContraction(size_t end) const {
    return end < c_.size() ? end + ContractionLength(c_, end, /*ignore_case=*/true) : end;
  }

  Chars c_;
  const std::vector<uint8_t>& f_;
};

void EmitPiece(std::string_view text, Chars c, size_t begin, size_t end,
               std::vector<std::string_view>* pieces) {
  const size_t from = c[begin].offset;
  const size_t to = c[end - 1].offset + c[end - 1].len;
  pieces->push_back(text.substr(from, to - from));
}

template <typename Match>
void Scan(std::string_view text, Chars c, Match match, std::vector<std::string_view>* pieces) {
  size_t i = 0;
  while (i < c.size()) {
    const size_t end = match(c, i);
    EmitPiece(text, c, i, end, pieces);
    i = end;
  }
}

// Digits(individual_digits=true) isolates every numeric character; the GPT-2
// regex then splits each stretch between them on its own.
void ScanSmolLm2(std::string_view text, Chars c, std::vector<std::string_view>* pieces) {
  size_t i = 0;
  while (i < c.size()) {
    if (IsDigitsNumeric(c[i].cp)) {
      EmitPiece(text, c, i, i + 1, pieces);
      ++i;
      continue;
    }
    size_t end = i;
    while (end < c.size() && !IsDigitsNumeric(c[end].cp)) ++end;
    Scan(text, c.subspan(0, end).subspan(i), MatchGpt2, pieces);
    i = end;
  }
}

}  // namespace

std::string_view PreTokenizerName(PreTokenizerKind kind) {
  switch (kind) {
    case PreTokenizerKind::kGpt2:
      return "gpt2";
    case PreTokenizerKind::kLlama3:
      return "llama3";
    case PreTokenizerKind::kQwen2:
      return "qwen2";
    case PreTokenizerKind::kSmolLm2:
      return "smollm2";
    case PreTokenizerKind::kKimiK2:
      return "kimi-k2";
    case PreTokenizerKind::kRegex:
      return "regex";
  }
  return "?";
}

std::string_view Llama3SplitRegex() {
  return R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
}

std::string_view Qwen2SplitRegex() {
  return R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
}

void PreTokenize(PreTokenizerKind kind, std::string_view text,
                 std::vector<std::string_view>* pieces) {
  const std::vector<TextChar> chars = DecodeText(text);
  const Chars c(chars);
  switch (kind) {
    case PreTokenizerKind::kGpt2:
      Scan(text, c, MatchGpt2, pieces);
      break;
    case PreTokenizerKind::kLlama3:
      Scan(
          text, c, [](Chars s, size_t i) { return MatchLlama3(s, i, 3); }, pieces);
      break;
    case PreTokenizerKind::kQwen2:
      Scan(
          text, c, [](Chars s, size_t i) { return MatchLlama3(s, i, 1); }, pieces);
      break;
    case PreTokenizerKind::kSmolLm2:
      ScanSmolLm2(text, c, pieces);
      break;
    case PreTokenizerKind::kKimiK2: {
      std::vector<uint8_t> flags(chars.size());
      for (size_t i = 0; i < chars.size(); ++i) flags[i] = KimiFlagsOf(chars[i]);
      Scan(text, c, KimiMatcher(c, flags), pieces);
      break;
    }
    case PreTokenizerKind::kRegex:  // not a scanner: PreTokenizerPipeline runs the regexes
      if (!text.empty()) pieces->push_back(text);
      break;
  }
}

}  // namespace anymoe
