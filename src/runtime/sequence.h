// One conversation's state on the device: its KV cache and the tokens it holds.
// Keeping the tokens lets the next turn reuse the longest common prefix.
#pragma once

#include <algorithm>
#include <memory>
#include <vector>

#include "models/kv_cache.h"

namespace anymoe {

struct Sequence {
  std::unique_ptr<KvCache> cache;
  std::vector<int32_t> tokens;  // tokens whose keys/values are in `cache`
  // The MTP layer's cache when drafting with it (runtime/mtp_drafter.h): row p
  // pairs the trunk's state at p with token p + 1, so it holds fewer rows.
  std::unique_ptr<KvCache> mtp_cache;

  int64_t capacity() const { return cache->capacity(); }
  // Drops everything after the first `n` tokens.
  void Truncate(size_t n) {
    if (n < tokens.size()) tokens.resize(n);
    cache->set_length(int64_t(tokens.size()));
    if (mtp_cache) {
      const int64_t rows = std::max<int64_t>(0, int64_t(tokens.size()) - 1);
      mtp_cache->set_length(std::min(mtp_cache->length(), rows));
    }
  }
};

}  // namespace anymoe
