// Incremental detokenization for streaming output (CLI, server SSE): ids go in one
// at a time and only complete UTF-8 comes out. A multibyte character split across
// tokens is held back until its last byte arrives, so no chunk is ever invalid
// UTF-8 and the concatenated chunks equal Tokenizer::Decode of all the ids.
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"

namespace anymoe {

class TokenStreamDecoder {
 public:
  // `tokenizer` must outlive the decoder.
  explicit TokenStreamDecoder(const Tokenizer& tokenizer, bool skip_special = false)
      : tokenizer_(tokenizer), skip_special_(skip_special) {}

  // Adds one id; returns the text that is now complete (possibly empty). Invalid
  // ids and bytes that can no longer form a character come out as U+FFFD.
  std::string Push(int32_t id);

  // Returns whatever is still held back (an unfinished character becomes U+FFFD)
  // and resets the decoder.
  std::string Flush();

  // Bytes currently held back (0..3).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace anymoe
