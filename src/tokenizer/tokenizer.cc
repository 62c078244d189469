// Tokenizer core: validation of a loaded TokenizerSpec, the encode pipeline (added
// tokens -> NFC -> pre-tokenizer -> BPE, or added tokens -> SentencePiece BPE) and
// decoding. The GGUF and tokenizer.json
// loaders live in tokenizer_gguf.cc and tokenizer_hf.cc.
#include "tokenizer/tokenizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <unordered_map>

#include "tokenizer/unicode_class.h"

namespace anymoe {
namespace {

// Upper bound on ids a model file may declare; rejects absurd sizes before allocating.
constexpr int64_t kMaxVocab = kMaxVocabTokens;

// HF ByteLevel decoder: a token whose characters are all in the byte alphabet
// stands for those bytes; any other token stands for its own UTF-8 text.
std::string TokenBytes(const std::string& text) {
  std::string bytes;
  return ByteLevelDecode(text, &bytes) ? bytes : text;
}

// NFC of valid UTF-8; text that is not valid UTF-8 is left as it is.
std::string Nfc(std::string_view text) {
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                   static_cast<utf8proc_ssize_t>(text.size()), &out,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  std::string result = n >= 0 ? std::string(reinterpret_cast<char*>(out), n) : std::string(text);
  std::free(out);
  return result;
}

Status CheckId(const TokenizerSpec& spec, int32_t id, std::string_view what) {
  if (id < -1 || id >= static_cast<int32_t>(spec.token_texts.size())) {
    return Status::Error(spec.source + ": " + std::string(what) + " id " + std::to_string(id) +
                         " is outside the vocabulary of " +
                         std::to_string(spec.token_texts.size()) + " tokens");
  }
  return Status::Ok();
}

Status Validate(const TokenizerSpec& spec) {
  const size_t n = spec.token_texts.size();
  if (n == 0) return Status::Error(spec.source + ": empty vocabulary");
  if (static_cast<int64_t>(n) > kMaxVocab) {
    return Status::Error(spec.source + ": vocabulary of " + std::to_string(n) +
                         " tokens exceeds the limit of " + std::to_string(kMaxVocab));
  }
  if (spec.kinds.size() != n) {
    return Status::Error(spec.source + ": token kinds (" + std::to_string(spec.kinds.size()) +
                         ") do not match the vocabulary size (" + std::to_string(n) + ")");
  }
  for (const int32_t id : spec.bpe_ids) {
    if (id < 0 || static_cast<size_t>(id) >= n) {
      return Status::Error(spec.source + ": vocabulary token id " + std::to_string(id) +
                           " out of range");
    }
  }
  for (const AddedToken& t : spec.added) {
    if (t.id < 0 || static_cast<size_t>(t.id) >= n) {
      return Status::Error(spec.source + ": added token id " + std::to_string(t.id) +
                           " out of range");
    }
    if (t.content.empty()) return Status::Error(spec.source + ": empty added token");
  }
  RETURN_IF_ERROR(CheckId(spec, spec.bos_id, "bos"));
  RETURN_IF_ERROR(CheckId(spec, spec.eos_id, "eos"));
  RETURN_IF_ERROR(CheckId(spec, spec.eot_id, "eot"));
  RETURN_IF_ERROR(CheckId(spec, spec.eom_id, "eom"));
  RETURN_IF_ERROR(CheckId(spec, spec.pad_id, "padding"));
  return Status::Ok();
}

}  // namespace

Expected<std::unique_ptr<Tokenizer>> Tokenizer::Create(TokenizerSpec spec) {
  RETURN_IF_ERROR(Validate(spec));
  std::unique_ptr<Tokenizer> tok(new Tokenizer());
  size_t text_bytes = 0;
  for (const std::string& t : spec.token_texts) text_bytes += t.size();
  tok->texts_.Reserve(spec.token_texts.size(), text_bytes);
  tok->pieces_.Reserve(spec.token_texts.size(), text_bytes);
  for (std::string& text : spec.token_texts) {
    tok->texts_.Add(text);
    tok->pieces_.Add(spec.sentencepiece ? SentencePieceTokenBytes(text) : TokenBytes(text));
    std::string().swap(text);  // the tables hold it now
  }
  std::vector<std::string>().swap(spec.token_texts);
  // The first id of a text, as before (FindToken of a repeated text).
  tok->texts_.BuildIndex(TokenTable::Repeats::kFirstWins, [](size_t) { return true; });
  if (spec.sentencepiece) {
    auto spm = SentencePieceBpe::Build(tok->texts_, spec.bpe_ids, spec.merges,
                                       std::move(*spec.sentencepiece));
    if (!spm.ok()) return spm.status().WithContext(spec.source);
    tok->spm_ = std::move(spm).value();
    spec.sentencepiece.reset();  // moved into spm_
  } else {
    auto bpe = BpeModel::Build(tok->texts_, spec.bpe_ids, spec.merges, spec.ignore_merges,
                               [&](std::string_view text) { return tok->texts_.Find(text) >= 0; });
    if (!bpe.ok()) return bpe.status().WithContext(spec.source);
    tok->bpe_ = std::move(bpe).value();
  }
  std::vector<BpeModel::Merge>().swap(spec.merges);
  std::vector<int32_t>().swap(spec.bpe_ids);
  if (spec.pre == PreTokenizerKind::kRegex) {
    auto pre = PreTokenizerPipeline::Build(spec.pre_stages);
    if (!pre.ok()) return pre.status().WithContext(spec.source);
    tok->pre_ = std::move(pre).value();
  } else {
    tok->pre_ = *PreTokenizerPipeline::Build({PreTokenizerStage::Scanner(spec.pre)});
  }
  tok->added_ = AddedTokenMatcher(spec.added);
  tok->spec_ = std::move(spec);
  tok->CollectStopIds();
  return tok;
}

size_t Tokenizer::table_bytes() const {
  return texts_.memory_bytes() + pieces_.memory_bytes() + bpe_.memory_bytes() +
         (spm_ ? spm_->memory_bytes() : 0) + spec_.kinds.capacity();
}

void Tokenizer::CollectStopIds() {
  std::vector<int32_t> ids = {spec_.eos_id, spec_.eot_id, spec_.eom_id};
  for (std::string_view text : {"<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|endoftext|>",
                                "<|end_of_text|>", "<|end|>", "<|user|>", "<|observation|>"}) {
    const int32_t id = FindToken(text);
    if (id >= 0 && IsSpecial(id)) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  for (int32_t id : ids) {
    if (id >= 0) stop_ids_.push_back(id);
  }
}

int32_t Tokenizer::FindToken(std::string_view text) const { return texts_.Find(text); }

TokenKind Tokenizer::kind(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return TokenKind::kUnused;
  return spec_.kinds[id];
}

bool Tokenizer::IsSpecial(int32_t id) const { return kind(id) == TokenKind::kSpecial; }

std::string_view Tokenizer::TokenPiece(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return {};
  return pieces_[size_t(id)];
}

std::string_view Tokenizer::TokenText(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return {};
  return texts_[size_t(id)];
}

Status Tokenizer::EncodeText(std::string_view text, std::vector<int32_t>* ids) const {
  std::string normalized;
  if (spec_.nfc) {
    normalized = Nfc(text);
    text = normalized;
  }
  std::vector<std::string_view> pieces;
  RETURN_IF_ERROR(pre_.Split(text, &pieces));
  // Pieces repeat (the words of prose, the runs of code): in a long text each
  // distinct piece runs the merges once and is copied from its first ids after
  // that. The cache is the call's own (concurrent encodes share nothing) and
  // holds views into `text`, so it is bounded by the text.
  constexpr size_t kCacheFromPieces = 256, kLongestCachedPiece = 64;
  if (pieces.size() < kCacheFromPieces) {
    for (std::string_view piece : pieces) bpe_.Encode(piece, ids);
    return Status::Ok();
  }
  std::unordered_map<std::string_view, std::pair<size_t, size_t>> first;  // piece -> its ids
  for (std::string_view piece : pieces) {
    if (piece.size() > kLongestCachedPiece) {
      bpe_.Encode(piece, ids);
      continue;
    }
    const auto [at, inserted] = first.try_emplace(piece, 0, 0);
    if (!inserted) {
      for (size_t i = at->second.first; i < at->second.second; ++i) {
        const int32_t id = (*ids)[i];
        ids->push_back(id);
      }
      continue;
    }
    const size_t begin = ids->size();
    bpe_.Encode(piece, ids);
    at->second = {begin, ids->size()};
  }
  return Status::Ok();
}

Expected<std::vector<int32_t>> Tokenizer::TryEncode(std::string_view text, bool add_bos,
                                                    bool parse_special) const {
  std::vector<int32_t> ids;
  RETURN_IF_ERROR(EncodeSplit(text, add_bos, parse_special, {}, &ids));
  return ids;
}

Expected<std::vector<int32_t>> Tokenizer::TryEncodeWithPlainRanges(
    std::string_view text, bool add_bos, std::span<const TextRange> plain_ranges) const {
  std::vector<int32_t> ids;
  RETURN_IF_ERROR(EncodeSplit(text, add_bos, /*parse_special=*/true, plain_ranges, &ids));
  return ids;
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_bos,
                                       bool parse_special) const {
  std::vector<int32_t> ids;
  (void)EncodeSplit(text, add_bos, parse_special, {}, &ids);
  return ids;
}

std::vector<int32_t> Tokenizer::EncodeWithPlainRanges(
    std::string_view text, bool add_bos, std::span<const TextRange> plain_ranges) const {
  std::vector<int32_t> ids;
  (void)EncodeSplit(text, add_bos, /*parse_special=*/true, plain_ranges, &ids);
  return ids;
}

Status Tokenizer::EncodeSplit(std::string_view text, bool add_bos, bool parse_special,
                              std::span<const TextRange> plain_ranges,
                              std::vector<int32_t>* ids) const {
  if (add_bos && spec_.bos_id >= 0) ids->push_back(spec_.bos_id);
  Status status;
  added_.Split(
      text, parse_special,
      [&](std::string_view segment, int token_index) {
        if (!status.ok()) return;
        if (token_index >= 0) {
          ids->push_back(added_.tokens()[token_index].id);
        } else if (spm_) {
          spm_->Encode(segment, /*at_text_start=*/segment.data() == text.data(), ids);
        } else {
          status = EncodeText(segment, ids);
        }
      },
      plain_ranges);
  if (add_bos && spec_.add_eos && spec_.eos_id >= 0) ids->push_back(spec_.eos_id);
  return status;
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string bytes;
  for (int32_t id : ids) {
    const TokenKind k = kind(id);
    if (k == TokenKind::kUnused) {
      bytes.append("\xEF\xBF\xBD");
      continue;
    }
    if (skip_special && k == TokenKind::kSpecial) continue;
    bytes.append(pieces_[size_t(id)]);
  }
  // SentencePiece: the space the encoder put before the text (HF's Strip
  // decoder, llama.cpp's remove_space).
  if (spm_ && spm_->options().strip_decoded_space && !bytes.empty() && bytes[0] == ' ') {
    bytes.erase(0, 1);
  }
  return ToValidUtf8(bytes);
}

}  // namespace anymoe
