// The merge step shared by both BPE models: a table of adjacent token pairs
// -> (rank, merged token) in one open-addressing array, and the loop that
// merges a word's symbols lowest rank first, leftmost among equal ranks (HF
// tokenizers' Word::merge_all; llama.cpp's SentencePiece merge order once
// scores are turned into ranks). A heap over a linked list: O(n log n).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace anymoe {

class MergeTable {
 public:
  struct Result {
    int32_t rank;  // lower merges first
    int32_t id;    // the merged token
  };

  // Sizes the table for `merges` pairs (at most half full). Clears it.
  void Reserve(size_t merges);
  // Sets the pair's result; a repeated pair keeps its last result (HF's BPE).
  void Set(int32_t left, int32_t right, Result result);
  const Result* Find(int32_t left, int32_t right) const;

  // Merges the adjacent ids of the word `(*ids)[begin..]` in place until no
  // pair is in the table; the ids before `begin` are left alone.
  void MergeAll(std::vector<int32_t>* ids, size_t begin) const;

  size_t size() const { return count_; }
  size_t memory_bytes() const { return slots_.capacity() * sizeof(Slot); }
  // The most slots a lookup walks (from a pair's home slot to its own): the
  // hash table's health, checked by tests.
  size_t longest_probe() const;

 private:
  struct Slot {
    uint64_t key = kEmpty;
    Result result{};
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};  // no pair of ids >= 0 makes it
  static uint64_t PairKey(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  size_t HomeSlot(uint64_t key) const;

  std::vector<Slot> slots_;  // a power of two
  size_t count_ = 0;
  int shift_ = 64;  // 64 - log2(slots_.size())
};

}  // namespace anymoe
