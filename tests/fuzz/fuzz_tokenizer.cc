// B1: arbitrary bytes (invalid UTF-8 included) through Encode and Decode of the
// byte-level BPE tokenizers of every supported family, and arbitrary ids
// through Decode and the streaming decoder. Checked properties, not only "no
// crash": valid UTF-8 round-trips exactly (except Qwen2, whose NFC normalizer
// changes text by design), Decode output is always valid UTF-8, and streamed
// chunks concatenate to Decode's output.
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "tokenizer/bpe.h"
#include "tokenizer/token_stream_decoder.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_class.h"

namespace {

using anymoe::Tokenizer;

struct Loaded {
  std::string name;
  std::unique_ptr<Tokenizer> tokenizer;
  // Bytes that have a token of their own. The reduced test vocabularies lack
  // some (HF tokenizers drops those bytes too), and text holding them cannot
  // round-trip.
  std::array<bool, 256> has_byte{};
};

const std::vector<Loaded>& Tokenizers() {
  static const std::vector<Loaded> all = [] {
    std::vector<Loaded> out;
    const std::string dir = anymoe::fuzz::GoldenDir() + "/tokenizer/";
    for (const char* name : {"smollm2_small", "gpt2_flags", "llama3", "qwen2", "glm4"}) {
      auto tok = Tokenizer::FromHfJson(dir + name + ".tokenizer.json", "");
      if (!tok.ok()) {
        std::fprintf(stderr, "fuzz_tokenizer: %s\n", tok.status().message().c_str());
        std::abort();
      }
      Loaded t{name, std::move(tok).value(), {}};
      for (int b = 0; b < 256; ++b) {
        t.has_byte[b] = t.tokenizer->FindToken(anymoe::ByteLevelEncode(std::string(1, char(b)))) >= 0;
      }
      out.push_back(std::move(t));
    }
    return out;
  }();
  return all;
}

void Fail(const Loaded& t, const char* what) {
  std::fprintf(stderr, "fuzz_tokenizer: %s: %s\n", t.name.c_str(), what);
  std::abort();
}

bool IsValidUtf8(const std::string& s) { return anymoe::ToValidUtf8(s) == s; }

void CheckText(const Loaded& t, const std::string& text, bool parse_special) {
  const std::vector<int32_t> ids = t.tokenizer->Encode(text, false, parse_special);
  for (int32_t id : ids) {
    if (id < 0 || id >= t.tokenizer->vocab_size()) Fail(t, "Encode produced an id outside the vocabulary");
  }
  const std::string decoded = t.tokenizer->Decode(ids);
  if (!IsValidUtf8(decoded)) Fail(t, "Decode produced invalid UTF-8");
  bool representable = true;
  for (unsigned char c : text) representable = representable && t.has_byte[c];
  if (!parse_special && t.name != "qwen2" && representable && IsValidUtf8(text) &&
      decoded != text) {
    Fail(t, "valid UTF-8 did not round-trip");
  }
}

void CheckIds(const Loaded& t, const uint8_t* data, size_t size) {
  std::vector<int32_t> ids(size / 4);
  if (!ids.empty()) std::memcpy(ids.data(), data, ids.size() * 4);
  for (int32_t& id : ids) {
    // Mostly ids near the vocabulary, some anywhere (negative, huge).
    if ((id & 0x70000000) != 0x70000000) id = int32_t(uint32_t(id) % uint32_t(t.tokenizer->vocab_size() + 16));
  }
  for (bool skip_special : {false, true}) {
    const std::string whole = t.tokenizer->Decode(ids, skip_special);
    if (!IsValidUtf8(whole)) Fail(t, "Decode of ids produced invalid UTF-8");
    anymoe::TokenStreamDecoder stream(*t.tokenizer, skip_special);
    std::string streamed;
    for (int32_t id : ids) {
      const std::string piece = stream.Push(id);
      if (!IsValidUtf8(piece)) Fail(t, "a streamed chunk is invalid UTF-8");
      streamed += piece;
    }
    streamed += stream.Flush();
    if (streamed != whole) Fail(t, "streamed chunks differ from Decode");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::string storage;
  const std::string_view expanded = anymoe::fuzz::ExpandInput(data, size, 256 << 10, &storage);
  data = reinterpret_cast<const uint8_t*>(expanded.data());
  size = expanded.size();
  if (size < 1 || size > (256 << 10)) return 0;
  const anymoe::fuzz::CpuBudget budget("fuzz_tokenizer");
  const std::vector<Loaded>& all = Tokenizers();
  const uint8_t selector = data[0];
  const Loaded& t = all[(selector & 0x0f) % all.size()];
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  if (selector & 0x80) {
    CheckIds(t, data + 1, size - 1);
  } else {
    CheckText(t, text, (selector & 0x40) != 0);
  }
  return 0;
}
