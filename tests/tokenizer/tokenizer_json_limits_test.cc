// tokenizer.json comes with a model from anywhere: a deeply nested document
// must be an error, not a stack overflow (nlohmann's copy and dump recurse
// once per level, nlohmann/json #5387).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tokenizer/tokenizer.h"

namespace anymoe {
namespace {

TEST(TokenizerJsonLimits, DeepNestingIsAnErrorNotACrash) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("anymoe_deep_tokenizer_" + std::to_string(getpid()) + ".json");
  for (const char* where : {"model", "pre_tokenizer", "added_tokens"}) {
    SCOPED_TRACE(where);
    {
      std::ofstream out(path);
      out << R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, ")" << where << "\": ";
      out << std::string(200000, '[') << std::string(200000, ']') << "}";
    }
    auto tok = Tokenizer::FromHfJson(path.string(), "");
    ASSERT_FALSE(tok.ok());
    EXPECT_NE(tok.status().message().find(path.string()), std::string::npos) << tok.status().message();
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace anymoe
