// Drafting with the model's MTP (NextN) layer. The layer keeps a KV cache of
// its own per sequence (Sequence::mtp_cache) whose row p joins the trunk's
// hidden state at position p with token p + 1; it must follow the trunk as the
// trunk's cache grows and is rolled back. Step appends the rows a trunk step
// made final and then drafts greedily: the MTP's argmax after the last row,
// fed back with the layer's own hidden state for each further token (the
// rows of those guesses are dropped again before Step returns).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "models/model.h"

namespace anymoe {

class MtpDrafter {
 public:
  explicit MtpDrafter(Model& model);

  // `hidden`: the trunk's hidden states (rows of Model::last_hidden(), or a
  // copy of them) at positions [first, first + next.size()), row i followed
  // by `next[i]`. Appends them to `cache` (which must hold exactly `first`
  // rows), then drafts up to `max_draft` tokens into `draft`. Overwrites
  // Model::last_hidden().
  Status Step(KvCache& cache, int64_t first, const Tensor& hidden, std::span<const int32_t> next,
              int64_t max_draft, std::vector<int32_t>& draft);

 private:
  Model& model_;
  std::vector<float> logits_;
};

}  // namespace anymoe
