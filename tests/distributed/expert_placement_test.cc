// The expert placement file: a valid file moves the experts it names and keeps
// the contiguous default elsewhere; every malformed one is refused with a line
// naming the layer, expert and problem.
#include "distributed/expert_placement.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "testing/test_files.h"

namespace anymoe {
namespace {

const std::vector<int64_t> kMoeLayers = {1, 2, 3};

Expected<ExpertPlacement> Parse(const std::string& text, int ranks = 2) {
  return ExpertPlacement::FromJson(nlohmann::json::parse(text), "p.json", ranks, kMoeLayers, 4);
}

std::string ErrorOf(const std::string& text, int ranks = 2) {
  auto p = Parse(text, ranks);
  EXPECT_FALSE(p.ok()) << text;
  return p.ok() ? "" : p.status().message();
}

TEST(ExpertPlacement, ContiguousRangesCoverEveryExpertOnce) {
  const ExpertPlacement p = ExpertPlacement::Contiguous(3, kMoeLayers, 8);
  // 8 experts over 3 ranks: [0, 2), [2, 5), [5, 8).
  const std::vector<int32_t> want = {0, 0, 1, 1, 1, 2, 2, 2};
  for (int64_t l : kMoeLayers) {
    const auto o = p.owners(l);
    EXPECT_EQ(std::vector<int32_t>(o.begin(), o.end()), want);
  }
  EXPECT_TRUE(p.owners(0).empty());  // a dense layer
  EXPECT_EQ(p.owned(2, 0), 2);
  EXPECT_EQ(p.owned(2, 1), 3);
}

TEST(ExpertPlacement, FileOverridesNamedLayersOnly) {
  auto p = Parse(R"({"ranks": 2, "layers": [{"layer": 2, "owners": [1, 0, 1, 0]}]})");
  ASSERT_TRUE(p.ok()) << p.status().message();
  const auto two = p->owners(2), one = p->owners(1);
  EXPECT_EQ(std::vector<int32_t>(two.begin(), two.end()), (std::vector<int32_t>{1, 0, 1, 0}));
  EXPECT_EQ(std::vector<int32_t>(one.begin(), one.end()), (std::vector<int32_t>{0, 0, 1, 1}));
}

class ExpertPlacementFile : public testing::TempDirTest {};

TEST_F(ExpertPlacementFile, Loads) {
  const std::string path =
      WriteText("p.json", R"({"layers": [{"layer": 3, "owners": [0, 0, 0, 1]}]})");
  auto p = ExpertPlacement::Load(path, 2, kMoeLayers, 4);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->owned(3, 0), 3);
  auto missing = ExpertPlacement::Load(Path("none.json"), 2, kMoeLayers, 4);
  EXPECT_FALSE(missing.ok());
}

TEST(ExpertPlacement, RefusesBadFilesNamingTheProblem) {

  EXPECT_NE(ErrorOf("[]").find("not a JSON object"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({})").find("missing \"layers\""), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"ranks": 4, "layers": []})").find("\"ranks\" is 4 but the job has 2"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"layers": [{"owners": [0, 0, 1, 1]}]})").find("integer \"layer\""),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"layers": [{"layer": 0, "owners": [0, 0, 1, 1]}]})")
                .find("layer 0: not a MoE layer"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"layers": [{"layer": 1, "owners": [0, 0, 1, 1]},
                                  {"layer": 1, "owners": [0, 0, 1, 1]}]})")
                .find("layer 1: listed twice"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"layers": [{"layer": 1}]})").find("layer 1: needs \"owners\""),
            std::string::npos);
  const std::string short_list = ErrorOf(R"({"layers": [{"layer": 2, "owners": [0, 1, 1]}]})");
  EXPECT_NE(short_list.find("layer 2: \"owners\" names 3 experts, the model has 4"),
            std::string::npos)
      << short_list;
  const std::string out_of_range =
      ErrorOf(R"({"layers": [{"layer": 3, "owners": [0, 1, 2, 1]}]})");
  EXPECT_NE(out_of_range.find("layer 3: expert 2: owner 2 is not a rank in [0, 2)"),
            std::string::npos)
      << out_of_range;
  EXPECT_NE(ErrorOf(R"({"layers": [{"layer": 3, "owners": [0, 1, -1, 1]}]})").find("expert 2"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"layers": [{"layer": 3, "owners": [0, "1", 0, 1]}]})").find("expert 1"),
            std::string::npos);
  EXPECT_EQ(ErrorOf("[]").rfind("p.json: expert placement: ", 0), 0u);
}

}  // namespace
}  // namespace anymoe
