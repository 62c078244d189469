// Turns one sequence's final-normed hidden states (Model::last_embeddings()),
// fed row by row in position order over however many prefill chunks, into the
// one vector an embedding request returns. The mean sums in double in
// position order, so the vector is the same whatever the chunking and batch.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "models/model_config.h"

namespace anymoe {

class EmbeddingPooler {
 public:
  EmbeddingPooler(EmbeddingPooling pooling, int64_t hidden, int64_t rows)
      : pooling_(pooling), rows_(rows), sum_(size_t(hidden), 0.0) {}

  // The hidden state of the next position of the prompt.
  void Add(std::span<const float> row);
  // The pooled vector, once every one of the prompt's `rows` rows was added.
  std::vector<float> Result() const;

 private:
  EmbeddingPooling pooling_;
  int64_t rows_;          // positions of the prompt
  int64_t added_ = 0;     // rows seen so far
  std::vector<double> sum_;  // the mean's running sum, or the kept row
};

}  // namespace anymoe
