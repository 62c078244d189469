// TokenStreamDecoder: appends each token's raw bytes to a small pending buffer and
// releases the longest prefix that does not end inside an unfinished character.
#include "tokenizer/token_stream_decoder.h"

#include "tokenizer/unicode_class.h"

namespace anymoe {

std::string TokenStreamDecoder::Push(int32_t id) {
  const TokenKind kind = tokenizer_.kind(id);
  if (kind == TokenKind::kUnused) {
    pending_.append("\xEF\xBF\xBD");  // same as Decode: invalid id -> U+FFFD
  } else if (!(skip_special_ && kind == TokenKind::kSpecial)) {
    pending_.append(tokenizer_.TokenPiece(id));
  }
  const size_t complete = CompleteUtf8PrefixLength(pending_);
  std::string out = ToValidUtf8(std::string_view(pending_).substr(0, complete));
  pending_.erase(0, complete);
  return out;
}

std::string TokenStreamDecoder::Flush() {
  std::string out = ToValidUtf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace anymoe
