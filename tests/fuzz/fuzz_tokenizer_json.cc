// A3: tokenizer.json bytes -> Tokenizer::FromHfJson (the streamed vocabulary,
// merges and added tokens, id density, token and count limits, merges naming
// unknown tokens; every model kind: byte-level BPE, SentencePiece BPE with
// byte fallback / Metaspace / Prepend+Replace, Split regexes from the file
// handed to the regex engine), then encodes and a decode with whatever loaded:
// ids in the vocabulary, Decode's output valid UTF-8. Inputs may be expansion
// recipes (fuzz_input.h), up to 1 MiB.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz_input.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_class.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::string storage;
  const std::string_view bytes = anymoe::fuzz::ExpandInput(data, size, 1 << 20, &storage);
  const anymoe::fuzz::CpuBudget budget("fuzz_tokenizer_json");
  const std::string path = anymoe::fuzz::MemoryFile(
      "tokenizer.json", reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  auto tokenizer = anymoe::Tokenizer::FromHfJson(path, "");
  if (!tokenizer.ok()) return 0;
  const anymoe::Tokenizer& t = **tokenizer;
  // Special tokens, invalid UTF-8, the SentencePiece marker and runs of
  // spaces, CJK and digits (byte fallback and the Split patterns' classes).
  for (const char* text : {"Hello <|im_end|> world 123 \xff", "  \xe2\x96\x81x\t\n\n  12345 ",
                           "\xe4\xbd\xa0\xe5\xa5\xbd, It's \xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd!"}) {
    for (bool parse_special : {true, false}) {
      auto ids = t.TryEncode(text, true, parse_special);
      if (!ids.ok()) continue;  // a regex from the file that hit its limits
      for (int32_t id : *ids) {
        if (id < 0 || id >= t.vocab_size()) {
          std::fprintf(stderr, "fuzz_tokenizer_json: Encode produced an id outside the vocabulary\n");
          std::abort();
        }
      }
      const std::string decoded = t.Decode(*ids);
      if (anymoe::ToValidUtf8(decoded) != decoded) {
        std::fprintf(stderr, "fuzz_tokenizer_json: Decode produced invalid UTF-8\n");
        std::abort();
      }
    }
  }
  return 0;
}
