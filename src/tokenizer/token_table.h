// Many short byte strings in one block (an arena and 4-byte offsets) with an
// optional open-addressing index by content: a tokenizer's texts and pieces.
// A token costs 4 bytes plus its bytes, and 8 more when indexed, where a
// std::string in a hash map costs ~90: a vocabulary read from a file takes
// memory in proportion to the file (issue 20), and lookups touch one array.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace anymoe {

class TokenTable {
 public:
  // Room for `count` strings of `bytes` bytes in all.
  void Reserve(size_t count, size_t bytes);
  // Appends `s` as entry size(). The arena holds less than 4 GiB.
  void Add(std::string_view s);
  size_t size() const { return offsets_.size() - 1; }
  std::string_view operator[](size_t i) const {
    return std::string_view(bytes_.data() + offsets_[i], offsets_[i + 1] - offsets_[i]);
  }

  // Indexes the entries `include(i)` accepts; of equal entries the first
  // (or the last) one is found. Find then answers in O(1) expected.
  enum class Repeats { kFirstWins, kLastWins };
  void BuildIndex(Repeats repeats, const std::function<bool(size_t)>& include);
  // The index of an indexed entry equal to `s`, or -1.
  int32_t Find(std::string_view s) const;

  size_t memory_bytes() const {
    return bytes_.capacity() + offsets_.capacity() * 4 + slots_.capacity() * 4;
  }

 private:
  std::string bytes_;
  std::vector<uint32_t> offsets_{0};
  std::vector<int32_t> slots_;  // entry index or -1; a power of two, at most half full
};

}  // namespace anymoe
