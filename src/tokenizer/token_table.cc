#include "tokenizer/token_table.h"

namespace anymoe {
namespace {

size_t Hash(std::string_view s) { return std::hash<std::string_view>{}(s); }

}  // namespace

void TokenTable::Reserve(size_t count, size_t bytes) {
  offsets_.reserve(count + 1);
  bytes_.reserve(bytes);
}

void TokenTable::Add(std::string_view s) {
  bytes_.append(s);
  offsets_.push_back(uint32_t(bytes_.size()));
}

void TokenTable::BuildIndex(Repeats repeats, const std::function<bool(size_t)>& include) {
  size_t n = 0;
  for (size_t i = 0; i < size(); ++i) n += include(i);
  size_t capacity = 16;
  while (capacity < 2 * n) capacity *= 2;
  slots_.assign(capacity, -1);
  const size_t mask = capacity - 1;
  for (size_t i = 0; i < size(); ++i) {
    if (!include(i)) continue;
    const std::string_view s = (*this)[i];
    for (size_t slot = Hash(s) & mask;; slot = (slot + 1) & mask) {
      if (slots_[slot] < 0) {
        slots_[slot] = int32_t(i);
        break;
      }
      if ((*this)[size_t(slots_[slot])] == s) {
        if (repeats == Repeats::kLastWins) slots_[slot] = int32_t(i);
        break;
      }
    }
  }
}

int32_t TokenTable::Find(std::string_view s) const {
  if (slots_.empty()) return -1;
  const size_t mask = slots_.size() - 1;
  for (size_t slot = Hash(s) & mask;; slot = (slot + 1) & mask) {
    const int32_t i = slots_[slot];
    if (i < 0) return -1;
    if ((*this)[size_t(i)] == s) return i;
  }
}

}  // namespace anymoe
