// One conversation's state on the device: its KV cache and the tokens it holds.
// Keeping the tokens lets the next turn reuse the longest common prefix.
#pragma once

#include <memory>
#include <vector>

#include "models/kv_cache.h"

namespace anymoe {

struct Sequence {
  std::unique_ptr<KvCache> cache;
  std::vector<int32_t> tokens;  // tokens whose keys/values are in `cache`

  int64_t capacity() const { return cache->capacity(); }
  // Drops everything after the first `n` tokens.
  void Truncate(size_t n) {
    if (n < tokens.size()) tokens.resize(n);
    cache->set_length(int64_t(tokens.size()));
  }
};

}  // namespace anymoe
