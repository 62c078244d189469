// SentencePieceBpe: the "▁" normalisation, character symbols with byte fallback,
// and the two merge orders. Score order is built as merge ranks: every split of
// a token's text into two tokens is a pair, ranked by the token's score (equal
// scores share a rank, so the leftmost pair wins, as in llama.cpp's queue).
#include "tokenizer/sentencepiece_bpe.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "formats/parse_util.h"
#include "tokenizer/unicode_class.h"

namespace anymoe {
namespace {

constexpr std::string_view kMarker = "\xE2\x96\x81";  // U+2581 "▁"

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// Byte length of the UTF-8 character whose lead byte is `lead`, as llama.cpp's
// symbol split reads it (continuation and invalid lead bytes count as 1).
size_t LeadLength(uint8_t lead) {
  static constexpr uint8_t kLengths[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLengths[lead >> 4];
}

}  // namespace

bool IsSentencePieceByteToken(std::string_view text, uint8_t* byte) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return false;
  const int hi = HexDigit(text[3]), lo = HexDigit(text[4]);
  if (hi < 0 || lo < 0) return false;
  *byte = static_cast<uint8_t>(hi * 16 + lo);
  return true;
}

std::string SentencePieceTokenBytes(std::string_view text) {
  uint8_t byte = 0;
  if (IsSentencePieceByteToken(text, &byte)) return std::string(1, static_cast<char>(byte));
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text.substr(i, kMarker.size()) == kMarker) {
      out.push_back(' ');
      i += kMarker.size();
    } else {
      out.push_back(text[i++]);
    }
  }
  return out;
}

Expected<SentencePieceBpe> SentencePieceBpe::Build(const TokenTable& texts,
                                                   const std::vector<int32_t>& ids,
                                                   const std::vector<BpeModel::Merge>& merges,
                                                   SentencePieceOptions options) {
  SentencePieceBpe model;
  size_t text_bytes = 0;
  for (const int32_t id : ids) text_bytes += texts[size_t(id)].size();
  model.vocab_.Reserve(ids.size(), text_bytes);
  model.vocab_ids_.reserve(ids.size());
  for (const int32_t id : ids) {
    model.vocab_.Add(texts[size_t(id)]);
    model.vocab_ids_.push_back(id);
  }
  // A repeated text: the last id, as HF's vocabulary map and llama.cpp's.
  model.vocab_.BuildIndex(TokenTable::Repeats::kLastWins, [](size_t) { return true; });
  model.byte_ids_.fill(-1);
  for (size_t i = 0; i < model.vocab_ids_.size(); ++i) {
    uint8_t byte = 0;
    if (IsSentencePieceByteToken(model.vocab_[i], &byte) && model.byte_ids_[byte] < 0) {
      model.byte_ids_[byte] = model.vocab_ids_[i];
    }
  }
  for (int c = 0; c < 128; ++c) {
    const char ch = static_cast<char>(c);
    model.ascii_ids_[size_t(c)] = model.VocabId(std::string_view(&ch, 1));
  }
  if (options.unk_id < 0 && !options.unk_token.empty()) {
    options.unk_id = texts.Find(options.unk_token);
    if (options.unk_id < 0) {
      return Status::Error("unk_token " + QuoteName(options.unk_token) +
                           " is not in the vocabulary");
    }
  }
  model.options_ = std::move(options);
  if (!model.options_.scores.empty()) {
    if (model.options_.scores.size() != texts.size()) {
      return Status::Error("scores has " + std::to_string(model.options_.scores.size()) +
                           " entries for " + std::to_string(texts.size()) + " tokens");
    }
    model.BuildScoreMerges();
  } else {
    RETURN_IF_ERROR(model.BuildRankMerges(merges));
  }
  return model;
}

int32_t SentencePieceBpe::VocabId(std::string_view text) const {
  const int32_t i = vocab_.Find(text);
  return i < 0 ? -1 : vocab_ids_[size_t(i)];
}

Status SentencePieceBpe::BuildRankMerges(const std::vector<BpeModel::Merge>& merges) {
  merges_.Reserve(merges.size());
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const BpeModel::Merge& m = merges[rank];
    joined = m.left + m.right;
    const int32_t l = VocabId(m.left), r = VocabId(m.right), j = VocabId(joined);
    for (const auto& [id, text] : {std::pair{l, &m.left}, std::pair{r, &m.right},
                                   std::pair{j, static_cast<const std::string*>(&joined)}}) {
      if (id < 0) {
        return Status::Error("merge " + std::to_string(rank) + " names " + QuoteName(*text) +
                             ", which is not in the vocabulary");
      }
    }
    merges_.Set(l, r, {static_cast<int32_t>(rank), j});
  }
  return Status::Ok();
}

void SentencePieceBpe::BuildScoreMerges() {
  // Dense ranks of the scores, highest first; NaN ranks last.
  const std::vector<float>& scores = options_.scores;
  auto key = [](float s) { return std::isnan(s) ? -std::numeric_limits<float>::infinity() : s; };
  std::vector<float> distinct;
  distinct.reserve(scores.size());
  for (const float s : scores) distinct.push_back(key(s));
  std::sort(distinct.begin(), distinct.end(), std::greater<>());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  auto rank_of = [&](int32_t id) {
    const float s = key(scores[size_t(id)]);
    return static_cast<int32_t>(
        std::lower_bound(distinct.begin(), distinct.end(), s, std::greater<>()) - distinct.begin());
  };
  // Each split of a producible token's text into two producible tokens, at
  // character boundaries (the symbols llama.cpp's bigrams join). Byte tokens
  // are never a merge's result: their text is not what they stand for.
  auto for_each_pair = [&](auto&& fn) {
    for (size_t i = 0; i < vocab_ids_.size(); ++i) {
      const int32_t id = vocab_ids_[i];
      const std::string_view text = vocab_[i];
      uint8_t byte = 0;
      if (VocabId(text) != id || IsSentencePieceByteToken(text, &byte)) continue;
      for (size_t k = LeadLength(uint8_t(text[0])); k < text.size();
           k += LeadLength(uint8_t(text[k]))) {
        const int32_t l = VocabId(text.substr(0, k));
        if (l < 0) continue;
        const int32_t r = VocabId(text.substr(k));
        if (r >= 0) fn(l, r, id);
      }
    }
  };
  size_t pairs = 0;
  for_each_pair([&](int32_t, int32_t, int32_t) { ++pairs; });
  merges_.Reserve(pairs);
  for_each_pair([&](int32_t l, int32_t r, int32_t id) { merges_.Set(l, r, {rank_of(id), id}); });
}

void SentencePieceBpe::EncodeWord(std::string_view word, std::vector<int32_t>* ids) const {
  const size_t begin = ids->size();
  bool last_unknown = false;
  for (size_t i = 0; i < word.size();) {
    const auto lead = static_cast<uint8_t>(word[i]);
    size_t len = 1;
    int32_t id = -1;
    if (lead < 0x80) {
      id = ascii_ids_[lead];
    } else {
      uint32_t cp = 0;
      if (DecodeUtf8At(word, i, &cp, &len) == Utf8Step::kValid) id = VocabId(word.substr(i, len));
    }
    const std::string_view character = word.substr(i, len);
    i += len;
    if (id >= 0) {
      ids->push_back(id);
      last_unknown = false;
      continue;
    }
    if (options_.byte_fallback && std::all_of(character.begin(), character.end(), [&](char c) {
          return byte_ids_[static_cast<uint8_t>(c)] >= 0;
        })) {
      for (const char c : character) ids->push_back(byte_ids_[static_cast<uint8_t>(c)]);
      last_unknown = false;
      continue;
    }
    // No token and no byte tokens: the unknown token, or nothing without one.
    if (options_.unk_id >= 0 && !(options_.fuse_unk && last_unknown)) {
      ids->push_back(options_.unk_id);
    }
    last_unknown = true;
  }
  merges_.MergeAll(ids, begin);
}

void SentencePieceBpe::Encode(std::string_view segment, bool at_text_start,
                              std::vector<int32_t>* ids) const {
  if (segment.empty()) return;
  const bool marked =
      segment.substr(0, kMarker.size()) == kMarker || (options_.escape_spaces && segment[0] == ' ');
  bool prefix = false;
  switch (options_.prefix) {
    case SentencePieceOptions::Prefix::kNever:
      break;
    case SentencePieceOptions::Prefix::kEverySegment:
      prefix = true;
      break;
    case SentencePieceOptions::Prefix::kFirstSegment:
      prefix = at_text_start && !marked;
      break;
    case SentencePieceOptions::Prefix::kUnlessMarked:
      prefix = !marked;
      break;
  }
  std::string text;
  text.reserve(
      segment.size() + kMarker.size() +
      (options_.escape_spaces ? 2 * size_t(std::count(segment.begin(), segment.end(), ' ')) : 0));
  if (prefix) text.append(kMarker);
  for (const char c : segment) {
    if (c == ' ' && options_.escape_spaces) {
      text.append(kMarker);
    } else {
      text.push_back(c);
    }
  }
  if (!options_.split_on_marker) {
    EncodeWord(text, ids);
    return;
  }
  // Metaspace split: each marker begins a word (MergedWithNext).
  const std::string_view all(text);
  size_t start = 0;
  for (size_t at = all.find(kMarker, 1); at != std::string_view::npos;
       at = all.find(kMarker, at + 1)) {
    if (at > start) EncodeWord(all.substr(start, at - start), ids);
    start = at;
  }
  EncodeWord(all.substr(start), ids);
}

}  // namespace anymoe
