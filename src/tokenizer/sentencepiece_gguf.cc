// ReadSentencePieceGguf: the llama.cpp SentencePiece keys (its converter's
// _set_vocab_sentencepiece layout): tokenizer.ggml.scores (one f32 per token),
// token types, add_space_prefix (default true, as llama.cpp), the unknown
// token and add_eos_token.
#include "formats/gguf.h"
#include "tokenizer/sentencepiece_loaders.h"

namespace anymoe {

Status ReadSentencePieceGguf(const GgufFile& gguf, TokenizerSpec* spec) {
  SentencePieceOptions options;
  ASSIGN_OR_RETURN(options.scores, gguf.GetF32Array("tokenizer.ggml.scores"));
  if (options.scores.size() != spec->token_texts.size()) {
    return Status::Error(gguf.path() + ": tokenizer.ggml.scores has " +
                         std::to_string(options.scores.size()) + " entries for " +
                         std::to_string(spec->token_texts.size()) + " tokens");
  }
  ASSIGN_OR_RETURN(std::optional<bool> prefix, gguf.FindBool("tokenizer.ggml.add_space_prefix"));
  const bool add_space_prefix = prefix.value_or(true);
  options.prefix = add_space_prefix ? SentencePieceOptions::Prefix::kEverySegment
                                    : SentencePieceOptions::Prefix::kNever;
  options.strip_decoded_space = add_space_prefix;
  ASSIGN_OR_RETURN(std::optional<uint32_t> unk, gguf.FindU32("tokenizer.ggml.unknown_token_id"));
  if (unk) {
    if (*unk >= spec->token_texts.size()) {
      return Status::Error(gguf.path() + ": tokenizer.ggml.unknown_token_id " +
                           std::to_string(*unk) + " is outside the vocabulary of " +
                           std::to_string(spec->token_texts.size()) + " tokens");
    }
    options.unk_id = static_cast<int32_t>(*unk);
  }
  ASSIGN_OR_RETURN(std::optional<bool> add_eos, gguf.FindBool("tokenizer.ggml.add_eos_token"));
  spec->add_eos = add_eos.value_or(false);
  spec->sentencepiece = std::move(options);
  return Status::Ok();
}

}  // namespace anymoe
