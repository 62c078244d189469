// Byte-level alphabet and BPE merging, equivalent to HF tokenizers' BPE::merge_word
// and Word::merge_all: the lowest-ranked adjacent pair merges first, leftmost among
// equal ranks, and stale heap entries are recognised against each symbol's
// current pair.
#include "tokenizer/bpe.h"

#include <algorithm>
#include <array>
#include <queue>

#include "formats/parse_util.h"
#include "tokenizer/unicode_class.h"

namespace anymoe {
namespace {

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes map to themselves, the other
// 68 bytes to U+0100.. in byte order.
struct ByteAlphabet {
  std::array<uint32_t, 256> byte_to_cp;
  std::array<int16_t, 324> cp_to_byte;  // -1 where a code point is not in the alphabet

  ByteAlphabet() {
    cp_to_byte.fill(-1);
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      byte_to_cp[b] = printable ? b : next++;
      cp_to_byte[byte_to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteAlphabet& Alphabet() {
  static const ByteAlphabet alphabet;
  return alphabet;
}

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

bool ByteLevelDecode(std::string_view token_text, std::string* bytes) {
  const ByteAlphabet& alphabet = Alphabet();
  bytes->clear();
  size_t i = 0;
  while (i < token_text.size()) {
    uint32_t cp = 0;
    size_t len = 0;
    if (DecodeUtf8At(token_text, i, &cp, &len) != Utf8Step::kValid) return false;
    if (cp >= alphabet.cp_to_byte.size() || alphabet.cp_to_byte[cp] < 0) return false;
    bytes->push_back(static_cast<char>(alphabet.cp_to_byte[cp]));
    i += len;
  }
  return true;
}

std::string ByteLevelEncode(std::string_view bytes) {
  std::string text;
  for (char c : bytes) AppendUtf8(Alphabet().byte_to_cp[static_cast<uint8_t>(c)], &text);
  return text;
}

Expected<BpeModel> BpeModel::Build(const TokenTable& texts, const std::vector<int32_t>& ids,
                                   const std::vector<Merge>& merges, bool ignore_merges,
                                   const std::function<bool(std::string_view)>& is_token) {
  BpeModel model;
  model.ignore_merges_ = ignore_merges;
  size_t text_bytes = 0;
  for (const int32_t id : ids) text_bytes += texts[size_t(id)].size();
  model.vocab_bytes_.Reserve(ids.size(), text_bytes);
  model.vocab_ids_.reserve(ids.size());
  std::string bytes;
  for (const int32_t id : ids) {
    if (!ByteLevelDecode(texts[size_t(id)], &bytes)) continue;
    model.vocab_bytes_.Add(bytes);
    model.vocab_ids_.push_back(id);
  }
  // A repeated text: the last id, as HF.
  model.vocab_bytes_.BuildIndex(TokenTable::Repeats::kLastWins, [](size_t) { return true; });
  for (int b = 0; b < 256; ++b) {
    const char byte = static_cast<char>(b);
    model.byte_ids_[b] = model.VocabId(std::string_view(&byte, 1));
  }
  size_t capacity = 16;
  model.merge_shift_ = 60;
  while (capacity < 2 * merges.size()) capacity *= 2, --model.merge_shift_;
  model.merges_.assign(capacity, MergeSlot{});
  std::string left, right, joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const Merge& m = merges[rank];
    const bool decoded = ByteLevelDecode(m.left, &left) && ByteLevelDecode(m.right, &right);
    const int32_t l = decoded ? model.VocabId(left) : -1;
    const int32_t r = decoded ? model.VocabId(right) : -1;
    const int32_t j = decoded ? model.VocabId(left + right) : -1;
    if (l >= 0 && r >= 0 && j >= 0) {
      model.SetMerge(PairKey(l, r), {static_cast<int32_t>(rank), j});
      continue;
    }
    joined = m.left + m.right;
    for (const std::string* part : {&m.left, &m.right, static_cast<const std::string*>(&joined)}) {
      if (!is_token(*part)) {
        return Status::Error("merge " + std::to_string(rank) + " names " + QuoteName(*part) +
                             ", which is not in the vocabulary");
      }
    }
    ++model.skipped_merges_;  // tokens of the file, but not byte-level BPE ones
  }
  return model;
}

int32_t BpeModel::VocabId(std::string_view bytes) const {
  const int32_t i = vocab_bytes_.Find(bytes);
  return i < 0 ? -1 : vocab_ids_[size_t(i)];
}

size_t BpeModel::HomeSlot(uint64_t key) const {
  // Fibonacci hashing: the product's top bits depend on every bit of the key.
  // (Its low bits, used before, depend only on the key's low bits, i.e. on the
  // right-hand id alone: the merges sharing a right-hand token piled into one
  // run of slots, and a lookup walked it.)
  return size_t((key * 0x9E3779B97F4A7C15ull) >> merge_shift_);
}

size_t BpeModel::longest_merge_probe() const {
  const size_t mask = merges_.size() - 1;
  size_t longest = 0;
  for (size_t slot = 0; slot < merges_.size(); ++slot) {
    if (merges_[slot].key == kEmpty) continue;
    longest = std::max(longest, ((slot - HomeSlot(merges_[slot].key)) & mask) + 1);
  }
  return longest;
}

void BpeModel::SetMerge(uint64_t key, MergeResult result) {
  const size_t mask = merges_.size() - 1;
  for (size_t slot = HomeSlot(key);; slot = (slot + 1) & mask) {
    if (merges_[slot].key == kEmpty) ++merge_count_;
    if (merges_[slot].key == kEmpty || merges_[slot].key == key) {
      merges_[slot] = {key, result};  // a repeated pair keeps its last rank, as HF's BPE
      return;
    }
  }
}

const BpeModel::MergeResult* BpeModel::FindMerge(int32_t left, int32_t right) const {
  if (merges_.empty()) return nullptr;
  const uint64_t key = PairKey(left, right);
  const size_t mask = merges_.size() - 1;
  for (size_t slot = HomeSlot(key);; slot = (slot + 1) & mask) {
    if (merges_[slot].key == key) return &merges_[slot].result;
    if (merges_[slot].key == kEmpty) return nullptr;
  }
}

void BpeModel::Encode(std::string_view piece, std::vector<int32_t>* ids) const {
  if (piece.empty()) return;
  // Symbol indices are int32: merge pieces of over 1 GiB in independent chunks
  // (no real pre-tokenizer piece is that long; this only bounds hostile input).
  constexpr size_t kMaxPiece = size_t{1} << 30;
  if (piece.size() > kMaxPiece) {
    for (size_t at = 0; at < piece.size(); at += kMaxPiece)
      Encode(piece.substr(at, kMaxPiece), ids);
    return;
  }
  if (ignore_merges_ || piece.size() == 1) {
    const int32_t id = VocabId(piece);
    if (id >= 0) {
      ids->push_back(id);
      return;
    }
  }
  std::vector<Symbol> symbols;
  symbols.reserve(piece.size());
  for (char c : piece) {
    const int32_t id = byte_ids_[static_cast<uint8_t>(c)];
    if (id < 0) continue;  // no token for this byte: dropped, as HF does without unk
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, index - 1, index + 1, true, -1, -1});
  }
  if (symbols.empty()) return;
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
    if (const MergeResult* m = FindMerge(s.id, symbols[s.next].id)) {
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
  for (int32_t i = 0; i >= 0; i = symbols[i].next) ids->push_back(symbols[i].id);
}

}  // namespace anymoe
