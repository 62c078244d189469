// Drafting with the model's MTP (NextN) layer. The layer keeps a KV cache of
// its own per sequence (Sequence::mtp_cache) whose row p joins the trunk's
// hidden state at position p with token p + 1; it must follow the trunk as the
// trunk's cache grows and is rolled back. Settle appends the rows a trunk step
// made final and then drafts greedily: the MTP's argmax after the last row,
// fed back with the layer's own hidden state for each further token (the
// rows of those guesses are dropped again before Settle returns). The
// sequences of one trunk step settle and draft together, one MTP pass per
// draft position for all of them (the passes are batch-invariant: each
// sequence gets the drafts it would get alone).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "models/model.h"
#include "models/workspace.h"
#include "runtime/decoding_sequence.h"

namespace anymoe {

class MtpDrafter {
 public:
  explicit MtpDrafter(Model& model);

  // `hidden`: the trunk step's hidden states (Model::last_hidden()); each
  // settle names its rows (MtpSettle::hidden_row, one per `next` token) and
  // its cache, which must hold exactly `first` rows. Appends them, then
  // drafts up to each settle's max_draft tokens into its `draft`. Overwrites
  // Model::last_hidden(). An error (nothing drafted) fails all of them.
  Status Settle(std::span<MtpSettle* const> settles, const Tensor& hidden);

 private:
  // `source` rows `rows` into gathered_, as one [rows, hidden] tensor.
  Expected<Tensor> Gather(const Tensor& source, std::span<const int32_t> rows);

  Model& model_;
  std::vector<float> logits_;
  Workspace gathered_;  // the MTP pass's input rows (last_hidden() is overwritten by it)
  std::vector<int32_t> rows_, tokens_;
  std::vector<Model::SequenceStep> steps_;
  std::vector<MtpSettle*> drafting_;
  std::vector<int64_t> settled_;
};

}  // namespace anymoe
