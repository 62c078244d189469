#include "runtime/embedding_pooler.h"

#include <algorithm>

namespace anymoe {

void EmbeddingPooler::Add(std::span<const float> row) {
  const int64_t position = added_++;
  const bool keep = pooling_ == EmbeddingPooling::kMean ||
                    (pooling_ == EmbeddingPooling::kCls && position == 0) ||
                    (pooling_ == EmbeddingPooling::kLast && position == rows_ - 1);
  if (!keep) return;
  const size_t n = std::min(row.size(), sum_.size());
  for (size_t i = 0; i < n; ++i) sum_[i] += double(row[i]);
}

std::vector<float> EmbeddingPooler::Result() const {
  const double scale = pooling_ == EmbeddingPooling::kMean && rows_ > 0 ? 1.0 / double(rows_) : 1.0;
  std::vector<float> out(sum_.size());
  for (size_t i = 0; i < sum_.size(); ++i) out[i] = float(sum_[i] * scale);
  return out;
}

}  // namespace anymoe
