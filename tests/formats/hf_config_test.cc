// config.json loading: typed getters, dotted lookups, and rejection of input
// that would hurt later (deep nesting, duplicate keys, oversize files, invalid
// JSON or UTF-8) with errors that name the file.
#include "formats/hf_config.h"

#include <gtest/gtest.h>

#include "formats/parse_util.h"
#include "testing/test_files.h"

namespace anymoe {
namespace {

using testing::HasError;

constexpr char kConfig[] = R"({
  "model_type": "qwen3_moe", "hidden_size": 2048, "num_experts": 128.0,
  "rms_norm_eps": 1e-06, "tie_word_embeddings": false, "vocab_size": 151936,
  "rope_scaling": {"type": "yarn", "factor": 4, "nested": {"deep": 7}},
  "big": 18446744073709551615, "neg": -3, "frac": 2.5, "text": "x", "nothing": null,
  "dotted.key": 11, "list": [1, 2]
})";

class HfConfigTest : public testing::TempDirTest {};

TEST_F(HfConfigTest, TypedGetters) {
  const std::string path = WriteText("config.json", kConfig);
  for (const std::string& p : {path, dir_.string()}) {
    Expected<std::unique_ptr<HfConfig>> ce = HfConfig::Load(p);
    ASSERT_TRUE(ce.ok()) << ce.status().message();
    EXPECT_EQ((*ce)->path(), path);
  }
  Expected<std::unique_ptr<HfConfig>> ce = HfConfig::Load(path);
  const HfConfig& c = **ce;
  EXPECT_EQ(c.GetInt("hidden_size").value(), 2048);
  EXPECT_EQ(c.GetInt("num_experts").value(), 128);  // integral float accepted
  EXPECT_EQ(c.GetInt("neg").value(), -3);
  EXPECT_TRUE(HasError(c.GetInt("frac").status(),
                       path + ": key 'frac' is number 2.5, expected an integer"));
  EXPECT_TRUE(
      HasError(c.GetInt("text").status(), "key 'text' is string \"x\", expected an integer"));
  EXPECT_TRUE(HasError(c.GetInt("big").status(), "expected an integer"));
  EXPECT_TRUE(HasError(c.GetInt("missing").status(), "key 'missing' is missing"));
  EXPECT_TRUE(HasError(c.GetInt("nothing").status(), "is missing"));
  EXPECT_TRUE(HasError(c.GetInt("list").status(), "key 'list' is array, expected"));
  EXPECT_EQ(c.GetInt("missing", 5), 5);
  EXPECT_EQ(c.GetInt("frac", 5), 5);
  EXPECT_EQ(c.GetInt("vocab_size", 5), 151936);
  EXPECT_DOUBLE_EQ(c.GetDouble("rms_norm_eps").value(), 1e-6);
  EXPECT_DOUBLE_EQ(c.GetDouble("hidden_size").value(), 2048.0);
  EXPECT_FALSE(c.GetDouble("text").ok());
  EXPECT_DOUBLE_EQ(c.GetDouble("missing", 0.5), 0.5);
  EXPECT_FALSE(c.GetBool("tie_word_embeddings", true));
  EXPECT_TRUE(c.GetBool("text", true));
  EXPECT_EQ(c.GetString("model_type").value(), "qwen3_moe");
  EXPECT_FALSE(c.GetString("hidden_size").has_value());
  EXPECT_EQ(c.GetString("rope_scaling.type").value(), "yarn");
  EXPECT_DOUBLE_EQ(c.GetDouble("rope_scaling.factor", 1.0), 4.0);
  EXPECT_EQ(c.GetInt("rope_scaling.nested.deep").value(), 7);
  EXPECT_EQ(c.Find("rope_scaling.nope"), nullptr);
  EXPECT_EQ(c.Find("hidden_size.x"), nullptr);
  EXPECT_EQ(c.GetInt("dotted.key").value(), 11);
  EXPECT_TRUE(c.json().is_object());
}

TEST_F(HfConfigTest, RejectsDeepNesting) {
  const auto nested = [](int depth) {
    std::string s = "{\"a\":";
    for (int i = 1; i < depth; ++i) s += "[";
    s += "1";
    for (int i = 1; i < depth; ++i) s += "]";
    return s + "}";
  };
  EXPECT_TRUE(HfConfig::Parse(nested(64), "config.json").ok());
  EXPECT_TRUE(HasError(HfConfig::Parse(nested(65), "config.json").status(),
                       "config.json: JSON nesting deeper than 64 levels"));
  // Far deeper than any stack could recurse: rejected early, no crash.
  const std::string deep =
      WriteText("config.json", std::string(1 << 20, '[') + std::string(1 << 20, ']'));
  EXPECT_TRUE(HasError(HfConfig::Load(deep).status(), deep + ": JSON nesting deeper than 64"));
}

// A config of many tiny values (the fuzzer's `{"x":[{},{},...]}`: 786 KB,
// 262,144 objects, ~1 s of a sanitised build) stops at the config limits.
TEST_F(HfConfigTest, RejectsConfigsOfTooManyValues) {
  auto repeated = [](const char* item, int n) {
    std::string s = "{\"model_type\":\"llama\",\"x\":[";
    for (int i = 0; i < n; ++i) s += std::string(i ? "," : "") + item;
    return s + "]}";
  };
  EXPECT_TRUE(HfConfig::Parse(repeated("{}", 8000), "c.json").ok());
  EXPECT_TRUE(HasError(HfConfig::Parse(repeated("{}", 9000), "c.json").status(),
                       "c.json: more than 8192 JSON objects and arrays"));
  EXPECT_TRUE(HfConfig::Parse(repeated("0", 65000), "c.json").ok());
  EXPECT_TRUE(HasError(HfConfig::Parse(repeated("0", 70000), "c.json").status(),
                       "c.json: more than 65536 JSON values"));
}

TEST_F(HfConfigTest, RejectsBadInput) {
  EXPECT_TRUE(HasError(HfConfig::Parse("{\"a\":1,\"a\":2}", "c.json").status(),
                       "c.json: duplicate JSON key 'a'"));
  EXPECT_TRUE(
      HasError(HfConfig::Parse("[1]", "c.json").status(), "c.json: config is not a JSON object"));
  EXPECT_TRUE(HasError(HfConfig::Parse("{\"a\":}", "c.json").status(), "c.json: invalid JSON"));
  EXPECT_TRUE(
      HasError(HfConfig::Parse("{\"a\":\"\xc3\"}", "c.json").status(), "c.json: invalid JSON"));
  EXPECT_TRUE(HasError(HfConfig::Parse("", "c.json").status(), "c.json: invalid JSON"));
  const std::string big = WriteText("big.json", "{\"a\":\"" + std::string(17 << 20, 'x') + "\"}");
  EXPECT_TRUE(HasError(HfConfig::Load(big).status(), big + ": file is "));
  EXPECT_TRUE(HasError(HfConfig::Load(Path("absent.json")).status(), Path("absent.json")));
  EXPECT_TRUE(HasError(HfConfig::Load(Path("sub")).status(), Path("sub")));
}

TEST(ParseUtilTest, QuoteNameEscapesAndTruncates) {
  EXPECT_EQ(QuoteName("blk.0.w"), "'blk.0.w'");
  EXPECT_EQ(QuoteName(std::string("a\nb\0c\xff\\", 7)), "'a\\x0ab\\x00c\\xff\\x5c'");
  const std::string q = QuoteName(std::string(500, 'x'));
  EXPECT_EQ(q.size(), 120u + 5);
  EXPECT_EQ(q.substr(q.size() - 4), "...'");
}

TEST(ParseUtilTest, DuplicateKeysCheckedPerObject) {
  EXPECT_TRUE(ParseJsonStrict(R"({"a":{"x":1},"b":{"x":2},"c":[{"x":1},{"x":2}]})", "j").ok());
  EXPECT_TRUE(HasError(ParseJsonStrict(R"({"a":[{"x":1,"y":2,"x":3}]})", "j").status(),
                       "duplicate JSON key 'x'"));
  EXPECT_TRUE(ParseJsonStrict(R"({"a":1,"a":2})", "j", JsonLimits{64, false}).ok());
}

}  // namespace
}  // namespace anymoe
