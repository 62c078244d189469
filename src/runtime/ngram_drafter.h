// Prompt-lookup drafting: when the last few tokens of a sequence occurred
// before in it (the prompt or the text generated so far), guess that what
// followed them then follows again. Costs no weights and no forward pass; pays
// off when the output copies its input (code edits, rewrites, summaries, RAG).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace anymoe {

struct NgramDraftOptions {
  // Match lengths tried, longest first: a longer match is a better predictor.
  // One-token matches are not tried by default: they propose on almost every
  // step and are mostly rejected, and each rejected row costs a row of compute.
  int max_ngram = 3;
  int min_ngram = 2;
};

// Proposes up to `max_draft` tokens to follow `context` into `draft` (cleared
// first): the tokens after the most recent earlier occurrence of the longest
// suffix of `context` of min_ngram..max_ngram tokens that has max_draft
// followers, or else (every occurrence lies within max_draft tokens of the
// end) after the earliest one, which has the most. Empty when none occurs.
void ProposeNgramDraft(std::span<const int32_t> context, int64_t max_draft,
                       const NgramDraftOptions& options, std::vector<int32_t>& draft);

}  // namespace anymoe
