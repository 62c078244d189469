// Byte-level alphabet and BPE merging, equivalent to HF tokenizers' BPE::merge_word
// and Word::merge_all: a piece's bytes become their tokens, then MergeTable merges
// the lowest-ranked adjacent pair first, leftmost among equal ranks.
#include "tokenizer/bpe.h"

#include <algorithm>
#include <array>

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
  model.merges_.Reserve(merges.size());
  std::string left, right, joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const Merge& m = merges[rank];
    const bool decoded = ByteLevelDecode(m.left, &left) && ByteLevelDecode(m.right, &right);
    const int32_t l = decoded ? model.VocabId(left) : -1;
    const int32_t r = decoded ? model.VocabId(right) : -1;
    const int32_t j = decoded ? model.VocabId(left + right) : -1;
    if (l >= 0 && r >= 0 && j >= 0) {
      model.merges_.Set(l, r, {m.rank >= 0 ? m.rank : static_cast<int32_t>(rank), j});
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
  const size_t begin = ids->size();
  for (char c : piece) {
    const int32_t id = byte_ids_[static_cast<uint8_t>(c)];
    if (id >= 0) ids->push_back(id);  // no token for this byte: dropped, as HF does without unk
  }
  merges_.MergeAll(ids, begin);
}

}  // namespace anymoe
