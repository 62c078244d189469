// A3: a tiktoken-style HF folder (Kimi K2 / K2.5) -> Tokenizer::FromTiktokenFolder:
// tiktoken.model's base64 + rank lines (rank density and repeats, token
// length, base64 padding), the pat_str read out of tokenization_kimi.py
// (handed to the regex engine: a pattern it rejects must be a load error, one
// that runs long must hit the match limit) and tokenizer_config.json's
// added_tokens_decoder and special ids; then an encode of the fuzzer's own
// text and a decode. Checked, not only "no crash": every id is in the
// vocabulary and Decode's output is valid UTF-8.
//
// Input layout (ByteReader): flags byte (bit 0: write tokenizer_config.json,
// bit 1: write tokenization_kimi.py, bit 2: parse special tokens, bit 3: the
// text to encode is the rest), the config text, the Python source (each a
// 2-byte length + bytes), then tiktoken.model and the text: the one bit 3
// names is the rest of the input, the other a 2-byte length + bytes first. An
// expansion recipe (fuzz_input.h) expands first, so a few bytes can stand for
// a model file of a million lines or a megabyte of one character class.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_class.h"

namespace {

namespace fs = std::filesystem;

// One folder per process, on tmpfs when there is one (the loader opens files
// by name; writing three small files costs far less than the load).
const fs::path& Folder() {
  static const fs::path dir = [] {
    const fs::path base = fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    fs::path d = base / ("anymoe_fuzz_tiktoken_" + std::to_string(getpid()));
    fs::create_directories(d);
    std::atexit([] { std::error_code ec; fs::remove_all(Folder(), ec); });
    return d;
  }();
  return dir;
}

void WriteOrRemove(const fs::path& path, bool present, std::string_view bytes) {
  if (!present) {
    std::error_code ec;
    fs::remove(path, ec);
    return;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "fuzz_tiktoken: cannot write %s\n", path.c_str());
    std::abort();
  }
}

void Fail(const char* what) {
  std::fprintf(stderr, "fuzz_tiktoken: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::string storage;
  const std::string_view bytes = anymoe::fuzz::ExpandInput(data, size, 1 << 20, &storage);
  const anymoe::fuzz::CpuBudget budget("fuzz_tiktoken");
  anymoe::fuzz::ByteReader in(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  const uint8_t flags = in.Byte();
  const std::string config = in.String(0xFFFF);
  const std::string source = in.String(0xFFFF);
  const bool text_is_rest = (flags & 8) != 0;
  const std::string first = in.String(0xFFFF);
  const std::string rest(in.Rest());
  const std::string& model = text_is_rest ? first : rest;
  const std::string& text = text_is_rest ? rest : first;
  const fs::path& dir = Folder();
  WriteOrRemove(dir / "tokenizer_config.json", (flags & 1) != 0, config);
  WriteOrRemove(dir / "tokenization_kimi.py", (flags & 2) != 0, source);
  WriteOrRemove(dir / "tiktoken.model", true, model);
  auto tokenizer = anymoe::Tokenizer::FromTiktokenFolder(dir.string());
  if (!tokenizer.ok()) return 0;
  const anymoe::Tokenizer& t = **tokenizer;
  // A regex limit fails the call with a status; anything else must encode.
  auto ids = t.TryEncode(text, true, (flags & 4) != 0);
  if (!ids.ok()) return 0;
  for (int32_t id : *ids) {
    if (id < 0 || id >= t.vocab_size()) Fail("Encode produced an id outside the vocabulary");
  }
  const std::string decoded = t.Decode(*ids);
  if (anymoe::ToValidUtf8(decoded) != decoded) Fail("Decode produced invalid UTF-8");
  return 0;
}
