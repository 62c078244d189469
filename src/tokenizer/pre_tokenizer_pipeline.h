// The pre-tokenizer of a model: a sequence of stages (HF pre_tokenizers.Sequence,
// llama.cpp's list of regexes per tokenizer.ggml.pre), each splitting every
// piece the previous stage produced. A stage is a regex Split (PCRE2, for any
// pattern a file carries), a Digits split, or one of the hand-written scanners,
// which replace a Split whose pattern is exactly the regex they implement
// (tests/tokenizer/pre_tokenizer_regex_test.cc checks they split identically).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/regex_splitter.h"

namespace anymoe {

struct PreTokenizerStage {
  enum class Type : uint8_t { kSplit, kScanner, kDigits };
  Type type = Type::kScanner;
  std::string pattern;  // kSplit: as the file wrote it (Oniguruma syntax)
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  PreTokenizerKind scanner = PreTokenizerKind::kGpt2;  // kScanner
  bool individual_digits = false;                      // kDigits

  static PreTokenizerStage Split(std::string pattern) {
    PreTokenizerStage s;
    s.type = Type::kSplit;
    s.pattern = std::move(pattern);
    return s;
  }
  static PreTokenizerStage Scanner(PreTokenizerKind kind) {
    PreTokenizerStage s;
    s.scanner = kind;
    return s;
  }
};

// HF ByteLevel(use_regex=true)'s regex, which the kGpt2 scanner implements.
std::string_view Gpt2SplitRegex();

// The stages for a GGUF `tokenizer.ggml.pre` name (llama.cpp's names); an
// unknown name is an error listing the known ones.
Expected<std::vector<PreTokenizerStage>> PreTokenizerStagesForGgufName(std::string_view name);

class PreTokenizerPipeline {
 public:
  PreTokenizerPipeline() = default;
  // Compiles the regex stages (errors: "tokenizer_regex_rejected"). With
  // use_scanners, a Split whose pattern a scanner implements runs the scanner.
  static Expected<PreTokenizerPipeline> Build(const std::vector<PreTokenizerStage>& stages,
                                              bool use_scanners = true);

  // Appends the pieces of `text` (views into it, covering what the stages keep).
  // Fails only when a regex hits its limits ("tokenizer_regex_limit").
  Status Split(std::string_view text, std::vector<std::string_view>* pieces) const;

  // The single scanner this pipeline is, or nullptr (a fast path for the common case).
  const PreTokenizerKind* single_scanner() const {
    return stages_.size() == 1 && stages_[0].type == PreTokenizerStage::Type::kScanner
               ? &stages_[0].scanner
               : nullptr;
  }
  size_t regex_stage_count() const { return regexes_.size(); }

 private:
  Status RunStage(size_t stage, std::string_view text, std::vector<std::string_view>* out) const;

  std::vector<PreTokenizerStage> stages_;
  std::vector<RegexSplitter> regexes_;  // one per kSplit stage, in order
  std::vector<int> regex_index_;        // stage -> index in regexes_, or -1
};

}  // namespace anymoe
