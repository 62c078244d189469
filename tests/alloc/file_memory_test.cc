// Memory for hostile model files (issue 20): loading a file may take a small
// multiple of its size on the heap, never more, whatever its counts and ids
// claim. On main 53f1f7f: a tokenizer.json with one id of 2^24-1 took 1.2 GB,
// 1M GGUF metadata keys +150 MB, 8M empty strings in a 64 MB GGUF +260 MB,
// one 100 MB token +540 MB, and a config with 2^32-1 layers 14.7 GB. The
// bound checked here: peak heap growth <= kMultiple x file size + kSlack
// (docs/reliability.md, "Memory for hostile files"). The files are scaled
// down from the where a smaller one shows the same thing.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "formats/gguf.h"
#include "formats/hf_config.h"
#include "formats/safetensors.h"
#include "heap_counter.h"
#include "models/config_loader.h"
#include "testing/test_files.h"
#include "tokenizer/tokenizer.h"

namespace anymoe {
namespace {

constexpr int64_t kMultiple = 8;
constexpr int64_t kSlack = 8 << 20;

class HostileFileMemory : public testing::TempDirTest {
 protected:
  // Peak heap growth of `load` (which must fail or succeed as `ok` says).
  void ExpectBounded(const std::string& what, const std::string& path,
                     const std::function<Status(const std::string&)>& load) {
    const int64_t size = int64_t(std::filesystem::file_size(path));
    testing::HeapPeak peak;
    const Status st = load(path);
    const int64_t growth = peak.growth();
    std::printf("%s: file %.1f MiB, peak heap growth %.1f MiB (%.2fx); %s\n", what.c_str(),
                double(size) / (1 << 20), double(growth) / (1 << 20), double(growth) / double(size),
                st.ok() ? "loaded" : st.message().substr(0, 120).c_str());
    EXPECT_LE(growth, kMultiple * size + kSlack) << what;
  }

  static Status LoadGguf(const std::string& path) {
    ASSIGN_OR_RETURN(auto file, GgufFile::Open(path));
    (void)ModelConfigFromGguf(*file);
    return Tokenizer::FromGguf(*file).status();
  }
  static Status LoadTokenizerJson(const std::string& path) {
    return Tokenizer::FromHfJson(path, "").status();
  }
};

std::string TokenizerJson(const nlohmann::json& vocab, const std::string& merges = "[]") {
  return "{\"model\":{\"type\":\"BPE\",\"vocab\":" + vocab.dump() + ",\"merges\":" + merges +
         "},\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"use_regex\":true},"
         "\"decoder\":{\"type\":\"ByteLevel\"}}";
}

TEST_F(HostileFileMemory, TokenizerJsonWithOneHugeId) {
  const std::string path =
      WriteText("tokenizer.json", TokenizerJson({{"a", 0}, {"b", (1 << 24) - 1}}));
  ExpectBounded("tokenizer.json, one id 2^24-1", path, LoadTokenizerJson);
}

TEST_F(HostileFileMemory, TokenizerJsonWithManyEntries) {
  // 300k distinct short tokens and as many merges: a real vocabulary's shape
  // at twice GLM's size, at the smallest bytes per entry.
  std::string vocab = "{";
  std::string merges = "[";
  const char* alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  int id = 0;
  for (int c = 0; c < 52; ++c) {
    if (c > 0) vocab += ",";
    vocab += std::string("\"") + alphabet[c] + "\":" + std::to_string(c);
  }
  id = 52;
  for (int i = 0; id < 300000; ++i) {
    const std::string l(1, alphabet[i % 52]), r = std::to_string(i);
    vocab += ",\"" + r + "\":" + std::to_string(id++);
    if (i < 1000) {
      vocab += ",\"" + l + r + "\":" + std::to_string(id++);
      merges += std::string(i ? "," : "") + "\"" + l + " " + r + "\"";
    }
  }
  const std::string path =
      WriteText("tokenizer.json", TokenizerJson(nlohmann::json::parse(vocab + "}"), merges + "]"));
  ExpectBounded("tokenizer.json, 300k entries", path, LoadTokenizerJson);
}

TEST_F(HostileFileMemory, GgufWithAMillionMetadataKeys) {
  testing::GgufBuilder b;
  for (int i = 0; i < 1000000; ++i) b.Scalar<uint8_t>("k" + std::to_string(i), testing::kTU8, 1);
  const std::string path = Write("keys.gguf", b.Build());
  ExpectBounded("GGUF, 1M metadata keys", path, LoadGguf);
}

TEST_F(HostileFileMemory, GgufWithMillionsOfEmptyStrings) {
  // The 8M empty strings in 64 MB, at a quarter of the size.
  testing::GgufBuilder b;
  b.String("general.architecture", "llama");
  b.String("tokenizer.ggml.model", "gpt2");
  b.StringArray("tokenizer.ggml.tokens", std::vector<std::string>(2 << 20));
  const std::string path = Write("strings.gguf", b.Build());
  ExpectBounded("GGUF, 2M empty strings", path, LoadGguf);
}

TEST_F(HostileFileMemory, GgufWithOneHugeToken) {
  testing::GgufBuilder b;
  b.String("tokenizer.ggml.model", "gpt2");
  b.StringArray("tokenizer.ggml.tokens", {"a", std::string(32 << 20, 'x')});
  b.StringArray("tokenizer.ggml.merges", {});
  const std::string path = Write("token.gguf", b.Build());
  ExpectBounded("GGUF, one 32 MiB token", path, LoadGguf);
}

TEST_F(HostileFileMemory, ConfigWithHugeLayerCounts) {
  for (const char* layers : {"-1", "4294967295", "1e9", "1e300"}) {
    const std::string path =
        WriteText("config.json", std::string("{\"model_type\":\"glm4_moe\",\"hidden_size\":64,"
                                             "\"num_attention_heads\":4,\"vocab_size\":512,"
                                             "\"num_hidden_layers\":") +
                                     layers + "}");
    ExpectBounded(std::string("config.json, num_hidden_layers ") + layers, path,
                  [](const std::string& p) -> Status {
                    ASSIGN_OR_RETURN(auto hf, HfConfig::Load(p));
                    return ModelConfigFromHf(*hf).status();
                  });
  }
}

TEST_F(HostileFileMemory, SafetensorsHeaderWithManyTensors) {
  std::string header = "{";
  for (int i = 0; i < 200000; ++i) {
    header += (i ? ",\"" : "\"") + std::to_string(i) +
              "\":{\"dtype\":\"F32\",\"shape\":[0],"
              "\"data_offsets\":[0,0]}";
  }
  header += "}";
  std::vector<uint8_t> bytes;
  testing::PutLE<uint64_t>(bytes, header.size());
  testing::Put(bytes, header.data(), header.size());
  const std::string path = Write("many.safetensors", bytes);
  ExpectBounded("safetensors, 200k tensors", path,
                [](const std::string& p) { return SafetensorsModel::Open(p).status(); });
}

}  // namespace
}  // namespace anymoe
