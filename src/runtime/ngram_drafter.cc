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
    // Most recent first: the nearest earlier occurrence predicts best. A match
    // ending at `end` (exclusive) must leave at least one token after it.
    for (int64_t end = len - 1; end >= n; --end) {
      if (!std::equal(suffix.begin(), suffix.end(), context.begin() + (end - n))) continue;
      const int64_t take = std::min(max_draft, len - end);
      draft.assign(context.begin() + end, context.begin() + end + take);
      return;
    }
  }
}

}  // namespace anymoe
