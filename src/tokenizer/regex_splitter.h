// A pre-tokenizer split by a regex from a model file (HF Split, llama.cpp's
// tokenizer.ggml.pre patterns), matched by PCRE2 with JIT. The pattern is
// untrusted: it is translated (regex_translate.h), compiled with bounded
// pattern size, probed at load time on hostile runs of each character class,
// and every match runs under match and heap limits, so a pathological pattern
// fails at load or its request fails alone, in bounded time and memory.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace anymoe {

// How a Split keeps the matches (HF SplitDelimiterBehavior).
enum class SplitBehavior : uint8_t {
  kIsolated,  // matches and the text between them are pieces
  kRemoved,   // only the text between matches is kept
};

class RegexSplitter {
 public:
  // Error codes: "tokenizer_regex_rejected" (translation, compilation, or a
  // load-time probe that hit a limit).
  static Expected<RegexSplitter> Compile(std::string_view pattern, SplitBehavior behavior,
                                         bool invert);

  // Appends the non-empty pieces of `text` in order (views into it). Any bytes
  // are accepted: invalid UTF-8 is matched as U+FFFD. A match that hits a limit
  // is the error "tokenizer_regex_limit" (pieces then holds a partial split).
  Status Split(std::string_view text, std::vector<std::string_view>* pieces) const;

  const std::string& pattern() const { return pattern_; }
  const std::string& pcre2_pattern() const { return translated_; }

 private:
  struct Compiled;
  RegexSplitter() = default;
  Status SplitValid(std::string_view text, std::string_view original,
                    const std::vector<size_t>* offsets,
                    std::vector<std::string_view>* pieces) const;

  std::string pattern_;     // as the file wrote it
  std::string translated_;  // what PCRE2 compiled
  SplitBehavior behavior_ = SplitBehavior::kIsolated;
  bool invert_ = false;
  std::shared_ptr<const Compiled> compiled_;  // immutable; copies share it
};

}  // namespace anymoe
