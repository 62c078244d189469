// MergeTable: Fibonacci-hashed pair slots and the heap-driven merge loop.
// Stale heap entries are recognised against each symbol's current pair.
#include "tokenizer/merge_table.h"

#include <algorithm>
#include <functional>
#include <queue>

namespace anymoe {
namespace {

struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  bool alive;
  // The merge of this symbol with `next` as last looked up: rank -1 for none.
  int32_t pair_rank;
  int32_t pair_id;
};

// A heap entry: rank in the high half, the left symbol's index in the low one,
// so one integer comparison orders by rank, then leftmost.
uint64_t Candidate(int32_t rank, int32_t pos) {
  return uint64_t(uint32_t(rank)) << 32 | uint32_t(pos);
}

}  // namespace

void MergeTable::Reserve(size_t merges) {
  size_t capacity = 16;
  shift_ = 60;
  while (capacity < 2 * merges) capacity *= 2, --shift_;
  slots_.assign(capacity, Slot{});
  count_ = 0;
}

size_t MergeTable::HomeSlot(uint64_t key) const {
  // Fibonacci hashing: the product's top bits depend on every bit of the key.
  // (Its low bits depend only on the key's low bits, i.e. on the right-hand id
  // alone: the merges sharing a right-hand token would pile into one run of
  // slots, and a lookup walk it.)
  return size_t((key * 0x9E3779B97F4A7C15ull) >> shift_);
}

size_t MergeTable::longest_probe() const {
  const size_t mask = slots_.size() - 1;
  size_t longest = 0;
  for (size_t slot = 0; slot < slots_.size(); ++slot) {
    if (slots_[slot].key == kEmpty) continue;
    longest = std::max(longest, ((slot - HomeSlot(slots_[slot].key)) & mask) + 1);
  }
  return longest;
}

void MergeTable::Set(int32_t left, int32_t right, Result result) {
  const uint64_t key = PairKey(left, right);
  const size_t mask = slots_.size() - 1;
  for (size_t slot = HomeSlot(key);; slot = (slot + 1) & mask) {
    if (slots_[slot].key == kEmpty) ++count_;
    if (slots_[slot].key == kEmpty || slots_[slot].key == key) {
      slots_[slot] = {key, result};
      return;
    }
  }
}

const MergeTable::Result* MergeTable::Find(int32_t left, int32_t right) const {
  if (slots_.empty()) return nullptr;
  const uint64_t key = PairKey(left, right);
  const size_t mask = slots_.size() - 1;
  for (size_t slot = HomeSlot(key);; slot = (slot + 1) & mask) {
    if (slots_[slot].key == key) return &slots_[slot].result;
    if (slots_[slot].key == kEmpty) return nullptr;
  }
}

void MergeTable::MergeAll(std::vector<int32_t>* ids, size_t begin) const {
  if (ids->size() < begin + 2 || count_ == 0) return;
  // Symbol indices are int32: a word of over 2^30 symbols merges in
  // independent chunks (no real word is that long; this only bounds hostile
  // input).
  constexpr size_t kMaxSymbols = size_t{1} << 30;
  if (ids->size() - begin > kMaxSymbols) {
    const std::vector<int32_t> word(ids->begin() + std::ptrdiff_t(begin), ids->end());
    ids->resize(begin);
    for (size_t at = 0; at < word.size(); at += kMaxSymbols) {
      const size_t chunk_begin = ids->size();
      const size_t end = std::min(word.size(), at + kMaxSymbols);
      ids->insert(ids->end(), word.begin() + std::ptrdiff_t(at),
                  word.begin() + std::ptrdiff_t(end));
      MergeAll(ids, chunk_begin);
    }
    return;
  }
  std::vector<Symbol> symbols;
  symbols.reserve(ids->size() - begin);
  for (size_t i = begin; i < ids->size(); ++i) {
    const int32_t id = (*ids)[i];
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, index - 1, index + 1, true, -1, -1});
  }
  symbols.back().next = -1;

  // A long word (a 256 KiB run of one character) keeps ~n entries in the heap:
  // entries are plain integers, and an entry is stale exactly when its
  // symbol's pair has changed since, which each symbol records (every change
  // to a pair re-runs push_pair on it), so popping needs no second lookup.
  std::vector<uint64_t> storage;
  storage.reserve(symbols.size());
  std::priority_queue<uint64_t, std::vector<uint64_t>, std::greater<>> heap(std::greater<>{},
                                                                            std::move(storage));
  auto push_pair = [&](int32_t pos) {
    Symbol& s = symbols[pos];
    s.pair_rank = -1;
    if (s.next < 0) return;
    if (const Result* m = Find(s.id, symbols[s.next].id)) {
      s.pair_rank = m->rank;
      s.pair_id = m->id;
      heap.push(Candidate(m->rank, pos));
    }
  };
  for (int32_t i = 0; i < static_cast<int32_t>(symbols.size()); ++i) push_pair(i);

  while (!heap.empty()) {
    const uint64_t top = heap.top();
    heap.pop();
    const auto pos = int32_t(uint32_t(top));
    Symbol& left = symbols[pos];
    if (!left.alive || left.pair_rank != int32_t(top >> 32)) continue;  // stale entry
    Symbol& right = symbols[left.next];
    left.id = left.pair_id;
    right.alive = false;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].prev = pos;
    if (left.prev >= 0) push_pair(left.prev);
    push_pair(pos);
  }
  ids->resize(begin);
  for (int32_t i = 0; i >= 0; i = symbols[i].next) ids->push_back(symbols[i].id);
}

}  // namespace anymoe
