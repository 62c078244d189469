// RegexSplitter: PCRE2 JIT matching of a translated pre-tokenizer pattern, with
// HF's Split semantics (leftmost-first matches, gaps kept as pieces, an empty
// match only marks a boundary) and limits on every match.
#include "tokenizer/regex_splitter.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>

#include "tokenizer/regex_translate.h"
#include "tokenizer/unicode_class.h"

namespace anymoe {
namespace {

// Backtracking steps one match may take (PCRE2 counts calls of its internal
// match function, or JIT's equivalent). Real pre-tokenizer patterns take a few
// per character; the limit bounds what a pattern with nested quantifiers can
// cost on one request.
constexpr uint32_t kMatchLimit = 5'000'000;
constexpr uint32_t kDepthLimit = 100'000;
constexpr uint32_t kHeapLimitKib = 64 << 10;
constexpr size_t kJitStackBytes = size_t{1} << 20;
// Compiled pattern size, in code units; PCRE2's own limit (link size 2) is 64 KiB.
constexpr size_t kMaxPatternCodeUnits = size_t{256} << 10;

Status LimitError(std::string_view pattern, int rc) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(rc, buf, sizeof buf);
  return Status::Error("pre-tokenizer regex '" + std::string(pattern.substr(0, 80)) +
                           "' hit a matching limit (" + reinterpret_cast<const char*>(buf) + ")",
                       ErrorKind::kInvalidArgument, "tokenizer_regex_limit");
}

struct JitStack {
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 << 10, kJitStackBytes, nullptr);
  ~JitStack() { pcre2_jit_stack_free(stack); }
};

pcre2_jit_stack* ThreadJitStack(void*) {
  thread_local JitStack stack;
  return stack.stack;
}

// One match data per thread, reused by every split (a split per piece is common:
// a later stage of a sequence runs once per piece of the one before).
pcre2_match_data* ThreadMatchData(const pcre2_code* code) {
  struct Holder {
    pcre2_match_data* data = nullptr;
    uint32_t pairs = 0;
    ~Holder() { pcre2_match_data_free(data); }
  };
  thread_local Holder holder;
  uint32_t captures = 0;
  pcre2_pattern_info(code, PCRE2_INFO_CAPTURECOUNT, &captures);
  if (holder.data == nullptr || holder.pairs < captures + 1) {
    pcre2_match_data_free(holder.data);
    holder.pairs = std::max<uint32_t>(captures + 1, 16);
    holder.data = pcre2_match_data_create(holder.pairs, nullptr);
  }
  return holder.data;
}

bool ValidUtf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    if (static_cast<uint8_t>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    uint32_t cp = 0;
    size_t len = 0;
    if (DecodeUtf8At(text, i, &cp, &len) != Utf8Step::kValid) return false;
    i += len;
  }
  return true;
}

// `text` with every ill-formed subpart replaced by U+FFFD; offsets[j] is the
// byte of `text` where byte j of the result comes from (and offsets.back() = size).
std::string ReplaceInvalid(std::string_view text, std::vector<size_t>* offsets) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    size_t len = 0;
    const Utf8Step step = DecodeUtf8At(text, i, &cp, &len);
    if (step == Utf8Step::kTruncated) len = text.size() - i;
    if (step == Utf8Step::kValid) {
      out.append(text.substr(i, len));
    } else {
      out.append("\xEF\xBF\xBD");
      len = std::max<size_t>(len, 1);
    }
    offsets->resize(out.size(), i);
    i += len;
  }
  offsets->push_back(text.size());
  return out;
}

size_t Utf8Length(uint8_t lead) { return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4; }

}  // namespace

struct RegexSplitter::Compiled {
  pcre2_code* code = nullptr;
  pcre2_match_context* context = nullptr;
  ~Compiled() {
    pcre2_match_context_free(context);
    pcre2_code_free(code);
  }
};

Expected<RegexSplitter> RegexSplitter::Compile(std::string_view pattern, SplitBehavior behavior,
                                               bool invert) {
  ASSIGN_OR_RETURN(std::string translated, TranslateOnigurumaPattern(pattern));
  const auto rejected = [&](const std::string& why) {
    return Status::Error(
        "pre-tokenizer regex '" + std::string(pattern.substr(0, 200)) + "' rejected: " + why,
        ErrorKind::kInvalidArgument, "tokenizer_regex_rejected");
  };
  pcre2_compile_context* cctx = pcre2_compile_context_create(nullptr);
  pcre2_set_newline(cctx, PCRE2_NEWLINE_LF);
  pcre2_set_max_pattern_length(cctx, kMaxPatternCodeUnits);
  pcre2_set_compile_extra_options(cctx, 0);
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  // Ruby syntax: ^ and $ are line anchors; . does not match \n.
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                    PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE | PCRE2_NEVER_BACKSLASH_C, &error,
                    &error_offset, cctx);
  pcre2_compile_context_free(cctx);
  if (code == nullptr) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(error, buf, sizeof buf);
    return rejected(std::string(reinterpret_cast<const char*>(buf)) + " (PCRE2, at byte " +
                    std::to_string(error_offset) + " of the translated pattern)");
  }
  auto compiled = std::make_shared<Compiled>();
  compiled->code = code;
  // JIT where the platform has it; the interpreter (same results, same limits) if not.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  pcre2_match_context* mctx = pcre2_match_context_create(nullptr);
  pcre2_set_match_limit(mctx, kMatchLimit);
  pcre2_set_depth_limit(mctx, kDepthLimit);
  pcre2_set_heap_limit(mctx, kHeapLimitKib);
  pcre2_jit_stack_assign(mctx, ThreadJitStack, nullptr);
  compiled->context = mctx;
  RegexSplitter splitter;
  splitter.compiled_ = std::move(compiled);
  splitter.pattern_ = std::string(pattern);
  splitter.translated_ = std::move(translated);
  splitter.behavior_ = behavior;
  splitter.invert_ = invert;
  // Hostile runs of each kind of character: a pattern that backtracks
  // exponentially on them fails here, at load, instead of in every request.
  std::vector<std::string_view> pieces;
  for (std::string_view unit : {"a", "A", "1", " ", "\n", "!", "\xE4\xB8\xAD", "a ", "1a", "'s"}) {
    std::string probe;
    for (int i = 0; i < 512; ++i) probe.append(unit);
    probe.append("\x01");
    pieces.clear();
    const Status st = splitter.Split(probe, &pieces);
    if (!st.ok()) return rejected(st.message() + " on a run of '" + std::string(unit) + "'");
  }
  return splitter;
}

Status RegexSplitter::Split(std::string_view text, std::vector<std::string_view>* pieces) const {
  if (ValidUtf8(text)) return SplitValid(text, text, nullptr, pieces);
  std::vector<size_t> offsets;
  const std::string replaced = ReplaceInvalid(text, &offsets);
  return SplitValid(replaced, text, &offsets, pieces);
}

Status RegexSplitter::SplitValid(std::string_view text, std::string_view original,
                                 const std::vector<size_t>* offsets,
                                 std::vector<std::string_view>* pieces) const {
  const auto emit = [&](size_t begin, size_t end, bool matched) {
    if (begin == end) return;
    if (behavior_ == SplitBehavior::kRemoved && matched != invert_) return;
    if (offsets != nullptr) {
      begin = (*offsets)[begin];
      end = (*offsets)[end];
    }
    pieces->push_back(original.substr(begin, end - begin));
  };
  pcre2_match_data* match = ThreadMatchData(compiled_->code);
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t prev = 0, start = 0;
  Status status;
  while (start <= text.size()) {
    const int rc = pcre2_match(compiled_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK,
                               match, compiled_->context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      status = LimitError(pattern_, rc);
      break;
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match);
    const size_t s = ov[0], e = ov[1];
    emit(prev, s, false);
    emit(s, e, true);
    prev = e;
    if (e > s) {
      start = e;
    } else if (e < text.size()) {
      start = e + Utf8Length(static_cast<uint8_t>(text[e]));
    } else {
      break;
    }
  }
  if (status.ok()) emit(prev, text.size(), false);
  return status;
}

}  // namespace anymoe
