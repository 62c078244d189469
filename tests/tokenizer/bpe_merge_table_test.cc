// The BPE merge table under keys that share their low bits: thousands of
// merges with the same right-hand token (as "X" + "ing" in real vocabularies)
// must not pile into one run of slots, and long single-word inputs must still
// merge as HF's BPE does (lowest rank first, leftmost among equals).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/bpe.h"
#include "tokenizer/token_table.h"

namespace anymoe {
namespace {

// Letters only: byte-level text and raw bytes coincide for them.
constexpr std::string_view kLetters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

struct Vocabulary {
  TokenTable texts;
  std::vector<int32_t> ids;
  std::vector<BpeModel::Merge> merges;

  int32_t Add(const std::string& text) {
    texts.Add(text);
    ids.push_back(int32_t(ids.size()));
    return ids.back();
  }
  Expected<BpeModel> Build() {
    texts.BuildIndex(TokenTable::Repeats::kLastWins, [](size_t) { return true; });
    return BpeModel::Build(texts, ids, merges, false, [](std::string_view) { return true; });
  }
};

// Every letter pair "xy" (2704 merges), then every "xy" + "z" (2704 merges
// sharing the right-hand token "z").
Vocabulary PairsThenSharedRight() {
  Vocabulary v;
  for (char c : kLetters) v.Add(std::string(1, c));
  for (char x : kLetters) {
    for (char y : kLetters) {
      v.Add({x, y});
      v.merges.push_back({std::string(1, x), std::string(1, y)});
    }
  }
  for (char x : kLetters) {
    for (char y : kLetters) {
      v.Add({x, y, 'z'});
      v.merges.push_back({std::string{x, y}, "z"});
    }
  }
  return v;
}

TEST(BpeMergeTable, MergesSharingTheirRightTokenStayNearTheirHomeSlots) {
  Vocabulary v = PairsThenSharedRight();
  auto model = v.Build();
  ASSERT_TRUE(model.ok()) << model.status().message();
  EXPECT_EQ(model->merge_count(), 2 * kLetters.size() * kLetters.size());
  // At most half full with a hash of every key bit, the longest run is a few
  // dozen slots; hashing the low bits only (the right-hand id) made it ~2700.
  EXPECT_LE(model->longest_merge_probe(), 64u) << "longest probe";
}

TEST(BpeMergeTable, LongWordsMergeLowestRankFirstLeftmostAmongEquals) {
  Vocabulary v = PairsThenSharedRight();
  auto model = v.Build();
  ASSERT_TRUE(model.ok()) << model.status().message();
  const auto id_of = [&](std::string_view text) { return v.texts.Find(text); };
  // "abz" x n: "ab" (rank of the pair) merges before "bz", then "ab"+"z".
  std::string word;
  for (int i = 0; i < 20000; ++i) word += "abz";
  std::vector<int32_t> ids;
  model->Encode(word, &ids);
  ASSERT_EQ(ids.size(), 20000u);
  for (int32_t id : ids) ASSERT_EQ(id, id_of("abz"));
  // "yyy...": "yy" merges pairwise from the left, leaving one "y" when odd
  // ("yy" + "y" is no merge).
  ids.clear();
  model->Encode(std::string(40001, 'y'), &ids);
  ASSERT_EQ(ids.size(), 20001u);
  for (size_t i = 0; i + 1 < ids.size(); ++i) ASSERT_EQ(ids[i], id_of("yy"));
  EXPECT_EQ(ids.back(), id_of("y"));
  // "zzzzz": "zz" "zz" "z" first, then the rightmost "zz" + "z" is a merge.
  ids.clear();
  model->Encode("zzzzz", &ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{id_of("zz"), id_of("zzz")}));
}

}  // namespace
}  // namespace anymoe
