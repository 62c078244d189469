#include "runtime/ngram_drafter.h"

#include <algorithm>

namespace anymoe {

void ProposeNgramDraft(std::span<const int32_t> context, int64_t max_draft,
                       const NgramDraftOptions& options, std::vector<int32_t>& draft) {
  draft.clear();
  const int64_t len = int64_t(context.size());
  if (max_draft <= 0) return;
  for (int64_t n = options.max_ngram; n >= std::max(1, options.min_ngram); --n) {
    if (n >= len) continue;
    const std::span<const int32_t> suffix = context.last(size_t(n));
    // Most recent first: the nearest earlier occurrence predicts best, unless
    // it lies so close to the end that fewer than max_draft tokens follow it
    // (text the output has just repeated): then an older occurrence with more
    // followers is taken (SmolLM2 code edit, --draft 8: 1.16x tokens/s, the
    // medians of 4 interleaved rounds; 89.8 % of drafts accepted against
    // 91.8 %, but more of them). A match ending at `end` (exclusive) must
    // leave at least one token after it. Followers only grow going back, so
    // the last match seen is the one to take.
    int64_t found = -1;
    for (int64_t end = len - 1; end >= n; --end) {
      if (!std::equal(suffix.begin(), suffix.end(), context.begin() + (end - n))) continue;
      found = end;
      if (len - end >= max_draft) break;
    }
    if (found >= 0) {
      const int64_t take = std::min(max_draft, len - found);
      draft.assign(context.begin() + found, context.begin() + found + take);
      return;
    }
  }
}

}  // namespace anymoe
