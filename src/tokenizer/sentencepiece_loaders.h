// The SentencePiece halves of the two tokenizer loaders: what GGUF
// `tokenizer.ggml.model = llama` and a tokenizer.json BPE with byte fallback /
// "▁" normalisation add to a TokenizerSpec. Tokenizer::FromGguf and FromHfJson
// call them; everything both model kinds share (tokens, added tokens, special
// ids, chat template) stays in those loaders.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "core/status.h"
#include "tokenizer/tokenizer.h"

namespace anymoe {

class GgufFile;

// After the token list is read: scores, add_space_prefix, the unknown token,
// add_eos. Byte tokens (<0xNN>) stay producible by byte fallback only.
Status ReadSentencePieceGguf(const GgufFile& gguf, TokenizerSpec* spec);

// Whether a tokenizer.json describes a SentencePiece-style BPE: model BPE with
// byte_fallback, or a Metaspace pre-tokenizer, or a Prepend("▁") normalizer.
bool IsSentencePieceJson(const nlohmann::json& root);

// Reads the normalizer, pre_tokenizer, decoder and model flags of such a file
// into spec->sentencepiece; anything outside the supported pipeline is an
// error naming the field.
Status ReadSentencePieceJson(const nlohmann::json& root, const std::string& path,
                             TokenizerSpec* spec);

}  // namespace anymoe
