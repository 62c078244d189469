// Linear time for the parsers of formats/ (issue 20, defect 2): a document of
// 2n items costs about twice one of n, measured as a ratio (testing/scaling.h).
// nlohmann's callback parser, which the strict parser used before, rescanned
// the parent container at every closed value: an 869 KB request of 80k `{}`
// took 36 s, a safetensors header of 160k entries 191 s.
#include <gtest/gtest.h>

#include "formats/gguf.h"
#include "formats/parse_util.h"
#include "formats/safetensors.h"
#include "testing/scaling.h"
#include "testing/test_files.h"

namespace anymoe {
namespace {

// `{"prompt":"x","a":[{},{},...]}` and the same with objects as members.
std::string EmptyObjects(size_t n, bool as_members) {
  std::string s = as_members ? "{\"prompt\":\"x\"" : "{\"prompt\":\"x\",\"a\":[";
  for (size_t i = 0; i < n; ++i) {
    if (as_members) {
      s += ",\"k" + std::to_string(i) + "\":{}";
    } else {
      s += i ? ",{}" : "{}";
    }
  }
  return s + (as_members ? "}" : "]}");
}

TEST(ParseScaling, JsonParsingIsLinear) {
  for (bool members : {false, true}) {
    SCOPED_TRACE(members);
    const std::string one = EmptyObjects(50000, members), two = EmptyObjects(200000, members);
    JsonLimits limits;
    limits.max_depth = 32;
    limits.quote_keys_in_errors = false;
    testing::ExpectLinearGrowth(members ? "JSON: objects as members" : "JSON: array of {}",
                                [&](int scale) {
                                  auto j = ParseJsonStrict(scale == 1 ? one : two, "body", limits);
                                  ASSERT_TRUE(j.ok()) << j.status().message();
                                });
  }
}

// The value and container limits (request bodies): a document at a limit
// parses, one value more fails naming the limit, before the rest is built.
TEST(ParseScaling, ValueAndContainerCountsAreLimited) {
  JsonLimits limits;
  limits.max_values = 10;
  limits.max_containers = 4;
  // {"a":[1,2,{}],"b":[]}: 7 values, 4 containers (root, two arrays, {}).
  EXPECT_TRUE(ParseJsonStrict(R"({"a":[1,2,{}],"b":[]})", "body", limits).ok());
  auto containers = ParseJsonStrict(R"({"a":[1,2,{}],"b":[[]]})", "body", limits);
  ASSERT_FALSE(containers.ok());
  EXPECT_NE(containers.status().message().find("more than 4 JSON objects and arrays"),
            std::string::npos)
      << containers.status().message();
  EXPECT_TRUE(ParseJsonStrict("[1,2,3,4,5,6,7,8,9]", "body", limits).ok());  // 10 values
  auto values = ParseJsonStrict("[1,2,3,4,5,6,7,8,9,10]", "body", limits);
  ASSERT_FALSE(values.ok());
  EXPECT_NE(values.status().message().find("more than 10 JSON values"), std::string::npos)
      << values.status().message();
  limits.max_values = limits.max_containers = 0;  // no limit
  EXPECT_TRUE(ParseJsonStrict(EmptyObjects(1000, false), "body", limits).ok());
}

// n empty F32 tensors: a header of ~60 n bytes.
std::vector<uint8_t> SafetensorsWith(size_t n) {
  std::string header = "{";
  for (size_t i = 0; i < n; ++i) {
    if (i) header += ",";
    header +=
        "\"t" + std::to_string(i) + "\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}";
  }
  header += "}";
  std::vector<uint8_t> b;
  testing::PutLE<uint64_t>(b, header.size());
  testing::Put(b, header.data(), header.size());
  return b;
}

class ParseScalingFiles : public testing::TempDirTest {};

TEST_F(ParseScalingFiles, SafetensorsHeaderIsLinear) {
  const std::string one = Write("one.safetensors", SafetensorsWith(20000));
  const std::string two = Write("two.safetensors", SafetensorsWith(80000));
  testing::ExpectLinearGrowth("safetensors header", [&](int scale) {
    auto m = SafetensorsModel::Open(scale == 1 ? one : two);
    ASSERT_TRUE(m.ok()) << m.status().message();
    ASSERT_EQ((*m)->tensors().size(), scale == 1 ? 20000u : 80000u);
  });
}

// n metadata keys of each kind (u32, string, small array), as GGUF's header.
std::vector<uint8_t> GgufWith(size_t n) {
  testing::GgufBuilder b;
  for (size_t i = 0; i < n; ++i) {
    const std::string k = "key." + std::to_string(i);
    switch (i % 3) {
      case 0:
        b.Scalar<uint32_t>(k, testing::kTU32, uint32_t(i));
        break;
      case 1:
        b.String(k, "value " + std::to_string(i));
        break;
      default:
        b.StringArray(k, {"a", "b"});
    }
  }
  return b.Build();
}

TEST_F(ParseScalingFiles, GgufMetadataIsLinear) {
  const std::string one = Write("one.gguf", GgufWith(10000));
  const std::string two = Write("two.gguf", GgufWith(40000));
  testing::ExpectLinearGrowth("GGUF metadata", [&](int scale) {
    auto g = GgufFile::Open(scale == 1 ? one : two);
    ASSERT_TRUE(g.ok()) << g.status().message();
    ASSERT_EQ((*g)->metadata().size(), scale == 1 ? 10000u : 40000u);
  });
}

}  // namespace
}  // namespace anymoe
