// Tokenizer::FromGguf: reads llama.cpp's tokenizer.ggml.* metadata into a
// TokenizerSpec. GGUF token types map to kinds as llama.cpp uses them (control and
// unknown -> special, user-defined -> added); every id read is range-checked.
#include <string>

#include "formats/gguf.h"
#include "tokenizer/sentencepiece_loaders.h"
#include "tokenizer/tokenizer.h"

namespace anymoe {
namespace {

// llama.cpp's llama_token_type values.
enum GgufTokenType : int32_t {
  kTypeNormal = 1,
  kTypeUnknown = 2,
  kTypeControl = 3,
  kTypeUserDefined = 4,
  kTypeUnused = 5,
  kTypeByte = 6,
};

TokenKind KindFor(int32_t type) {
  switch (type) {
    case kTypeUnknown:
    case kTypeControl:
      return TokenKind::kSpecial;
    case kTypeUserDefined:
      return TokenKind::kAdded;
    case kTypeUnused:
      return TokenKind::kUnused;
    default:
      return TokenKind::kNormal;
  }
}

// Llama-3 and GLM tokenizer.json files set BPE ignore_merges; llama.cpp does the
// same for these pre-tokenizer types.
bool IgnoresMerges(std::string_view pre) {
  return pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3" || pre == "dbrx" ||
         pre == "smaug-bpe" || pre == "glm4" || pre == "chatglm-bpe" || pre == "tekken";
}

Status ReadSpecialId(const GgufFile& gguf, std::string_view key, int32_t* id) {
  ASSIGN_OR_RETURN(std::optional<uint32_t> value, gguf.FindU32(key));
  if (!value) return Status::Ok();
  if (*value >= (1u << 31)) {
    return Status::Error(gguf.path() + ": metadata key '" + std::string(key) +
                         "' = " + std::to_string(*value) + " is not a valid token id");
  }
  *id = static_cast<int32_t>(*value);
  return Status::Ok();
}

Status ReadTokens(const GgufFile& gguf, TokenizerSpec* spec) {
  ASSIGN_OR_RETURN(std::span<const std::string_view> tokens,
                   gguf.GetStringArray("tokenizer.ggml.tokens"));
  // Checked before anything is copied out of the file.
  if (int64_t(tokens.size()) > kMaxVocabTokens) {
    return Status::Error(gguf.path() + ": tokenizer.ggml.tokens has " +
                         std::to_string(tokens.size()) + " entries, over the limit of " +
                         std::to_string(kMaxVocabTokens));
  }
  for (size_t id = 0; id < tokens.size(); ++id) {
    if (tokens[id].size() > kMaxTokenBytes) {
      return Status::Error(gguf.path() + ": tokenizer.ggml.tokens[" + std::to_string(id) + "] is " +
                           std::to_string(tokens[id].size()) + " bytes, over the limit of " +
                           std::to_string(kMaxTokenBytes));
    }
  }
  std::vector<int32_t> types(tokens.size(), kTypeNormal);
  if (gguf.FindValue("tokenizer.ggml.token_type") != nullptr) {
    ASSIGN_OR_RETURN(types, gguf.GetI32Array("tokenizer.ggml.token_type"));
    if (types.size() != tokens.size()) {
      return Status::Error(gguf.path() + ": tokenizer.ggml.token_type has " +
                           std::to_string(types.size()) + " entries for " +
                           std::to_string(tokens.size()) + " tokens");
    }
  }
  spec->token_texts.assign(tokens.begin(), tokens.end());
  spec->kinds.reserve(tokens.size());
  for (size_t id = 0; id < tokens.size(); ++id) {
    const TokenKind kind = KindFor(types[id]);
    spec->kinds.push_back(kind);
    const auto token_id = static_cast<int32_t>(id);
    if (kind == TokenKind::kNormal) {
      spec->bpe_ids.push_back(token_id);
    } else if ((kind == TokenKind::kSpecial || kind == TokenKind::kAdded) && !tokens[id].empty()) {
      AddedToken added;
      added.id = token_id;
      added.content = std::string(tokens[id]);
      added.special = kind == TokenKind::kSpecial;
      spec->added.push_back(std::move(added));
    }
  }
  return Status::Ok();
}

Status ReadMerges(const GgufFile& gguf, TokenizerSpec* spec) {
  ASSIGN_OR_RETURN(std::span<const std::string_view> merges,
                   gguf.GetStringArray("tokenizer.ggml.merges"));
  if (int64_t(merges.size()) > kMaxMerges) {
    return Status::Error(gguf.path() + ": tokenizer.ggml.merges has " +
                         std::to_string(merges.size()) + " entries, over the limit of " +
                         std::to_string(kMaxMerges));
  }
  spec->merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string_view m = merges[i];
    const size_t space = m.size() > 1 ? m.find(' ', 1) : std::string_view::npos;
    if (space == std::string_view::npos || m.size() > 2 * kMaxTokenBytes) {
      return Status::Error(gguf.path() + ": tokenizer.ggml.merges[" + std::to_string(i) +
                           "] is not two space-separated tokens");
    }
    spec->merges.push_back({std::string(m.substr(0, space)), std::string(m.substr(space + 1))});
  }
  return Status::Ok();
}

Status ReadSpecials(const GgufFile& gguf, TokenizerSpec* spec) {
  RETURN_IF_ERROR(ReadSpecialId(gguf, "tokenizer.ggml.bos_token_id", &spec->bos_id));
  RETURN_IF_ERROR(ReadSpecialId(gguf, "tokenizer.ggml.eos_token_id", &spec->eos_id));
  RETURN_IF_ERROR(ReadSpecialId(gguf, "tokenizer.ggml.eot_token_id", &spec->eot_id));
  RETURN_IF_ERROR(ReadSpecialId(gguf, "tokenizer.ggml.eom_token_id", &spec->eom_id));
  RETURN_IF_ERROR(ReadSpecialId(gguf, "tokenizer.ggml.padding_token_id", &spec->pad_id));
  ASSIGN_OR_RETURN(std::optional<bool> add_bos, gguf.FindBool("tokenizer.ggml.add_bos_token"));
  spec->add_bos = add_bos.value_or(false);
  ASSIGN_OR_RETURN(std::optional<std::string> tmpl, gguf.FindString("tokenizer.chat_template"));
  spec->chat_template = tmpl.value_or("");
  return Status::Ok();
}

// tokenizer.ggml.model = llama: the token list and specials as for gpt2, scores
// instead of merges, no pre-tokenizer.
Expected<std::unique_ptr<Tokenizer>> FromGgufSentencePiece(const GgufFile& gguf) {
  TokenizerSpec spec;
  spec.source = gguf.path();
  RETURN_IF_ERROR(ReadTokens(gguf, &spec));
  RETURN_IF_ERROR(ReadSentencePieceGguf(gguf, &spec));
  RETURN_IF_ERROR(ReadSpecials(gguf, &spec));
  return Tokenizer::Create(std::move(spec));
}

}  // namespace

Expected<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const GgufFile& gguf) {
  ASSIGN_OR_RETURN(std::string model, gguf.GetString("tokenizer.ggml.model"));
  if (model == "llama") return FromGgufSentencePiece(gguf);
  if (model != "gpt2") {
    return Status::Error(gguf.path() + ": tokenizer model '" + model +
                         "' is not supported; supported: gpt2 (byte-level BPE), llama "
                         "(SentencePiece BPE)");
  }
  ASSIGN_OR_RETURN(std::optional<std::string> pre_name, gguf.FindString("tokenizer.ggml.pre"));
  const std::string pre = pre_name.value_or("default");
  TokenizerSpec spec;
  spec.source = gguf.path();
  auto stages = PreTokenizerStagesForGgufName(pre);
  if (!stages.ok()) return stages.status().WithContext(gguf.path() + ": tokenizer.ggml.pre");
  if (stages->size() == 1 && stages->front().type == PreTokenizerStage::Type::kScanner) {
    spec.pre = stages->front().scanner;
  } else {
    spec.pre = PreTokenizerKind::kRegex;
    spec.pre_stages = std::move(stages).value();
  }
  spec.ignore_merges = IgnoresMerges(pre);
  RETURN_IF_ERROR(ReadTokens(gguf, &spec));
  RETURN_IF_ERROR(ReadMerges(gguf, &spec));
  RETURN_IF_ERROR(ReadSpecials(gguf, &spec));
  return Create(std::move(spec));
}

}  // namespace anymoe
