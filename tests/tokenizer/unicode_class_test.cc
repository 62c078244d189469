// Checks the character classes against every code point as HF tokenizers' regex
// engine classifies it, and the UTF-8 decoding / repair / hold-back helpers.
#include "tokenizer/unicode_class.h"

#include <gtest/gtest.h>

#include <set>

#include "golden_util.h"

namespace anymoe {
namespace {

CharClass FromLetter(const std::string& s) {
  if (s == "L") return CharClass::kLetter;
  if (s == "N") return CharClass::kNumber;
  if (s == "S") return CharClass::kWhitespace;
  return CharClass::kOther;
}

TEST(UnicodeClassTest, EveryCodePointMatchesReferenceRegexEngine) {
  const auto golden = testing::LoadGoldenJson("unicode_classes.json");
  size_t checked = 0, mismatches = 0;
  for (const auto& run : golden["runs"]) {
    const auto first = run[0].get<uint32_t>(), last = run[1].get<uint32_t>();
    const CharClass want = FromLetter(run[2].get<std::string>());
    for (uint32_t cp = first; cp <= last; ++cp, ++checked) {
      if (ClassifyCodepoint(cp) != want && ++mismatches <= 10) {
        ADD_FAILURE() << "U+" << std::hex << cp << " class " << int(ClassifyCodepoint(cp))
                      << " want " << int(want);
      }
    }
  }
  EXPECT_EQ(mismatches, 0u);
  EXPECT_EQ(checked, 0x110000u - 0x800u);  // all but the surrogates
}

TEST(UnicodeClassTest, DigitsNumericMatchesHfDigits) {
  const auto golden = testing::LoadGoldenJson("unicode_classes.json");
  std::set<uint32_t> numeric;
  for (const auto& cp : golden["digits_numeric"]) numeric.insert(cp.get<uint32_t>());
  size_t mismatches = 0;
  for (uint32_t cp = 0; cp < 0x110000; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    if (IsDigitsNumeric(cp) != (numeric.count(cp) > 0) && ++mismatches <= 10) {
      ADD_FAILURE() << "U+" << std::hex << cp;
    }
  }
  EXPECT_EQ(mismatches, 0u);
}

TEST(UnicodeClassTest, DecodeHandlesIllFormedSequences) {
  uint32_t cp = 0;
  size_t len = 0;
  EXPECT_EQ(DecodeUtf8At("\xE2\x82\xAC", 0, &cp, &len), Utf8Step::kValid);
  EXPECT_EQ(cp, 0x20ACu);
  EXPECT_EQ(len, 3u);
  EXPECT_EQ(DecodeUtf8At("\xE2\x82", 0, &cp, &len), Utf8Step::kTruncated);
  EXPECT_EQ(DecodeUtf8At("\xE2\x28\xA1", 0, &cp, &len), Utf8Step::kInvalid);
  EXPECT_EQ(len, 1u);
  EXPECT_EQ(DecodeUtf8At("\xED\xA0\x80", 0, &cp, &len), Utf8Step::kInvalid);  // surrogate
  EXPECT_EQ(DecodeUtf8At("\xC0\xAF", 0, &cp, &len), Utf8Step::kInvalid);      // overlong
  EXPECT_EQ(DecodeUtf8At("\xF4\x90\x80\x80", 0, &cp, &len), Utf8Step::kInvalid);
  EXPECT_EQ(DecodeUtf8At("\xFF", 0, &cp, &len), Utf8Step::kInvalid);
}

TEST(UnicodeClassTest, ToValidUtf8ReplacesMaximalSubparts) {
  // Same as Rust's String::from_utf8_lossy (Unicode "maximal subpart" practice).
  EXPECT_EQ(ToValidUtf8("a\xF0\x9F\x98"
                        "b"),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(ToValidUtf8("\xE2\x28\xA1"), "\xEF\xBF\xBD(\xEF\xBF\xBD");
  EXPECT_EQ(ToValidUtf8("ok \xC3\xA9"), "ok \xC3\xA9");
  EXPECT_EQ(ToValidUtf8("\xE0\x80\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(UnicodeClassTest, CompletePrefixHoldsBackOnlyUnfinishedCharacters) {
  EXPECT_EQ(CompleteUtf8PrefixLength("abc"), 3u);
  EXPECT_EQ(CompleteUtf8PrefixLength("ab\xF0\x9F\x98"), 2u);
  EXPECT_EQ(CompleteUtf8PrefixLength("ab\xF0\x9F\x98\x80"), 6u);
  EXPECT_EQ(CompleteUtf8PrefixLength("\xC3"), 0u);
  EXPECT_EQ(CompleteUtf8PrefixLength("\xE2\x28"), 2u);  // already invalid: release it
  EXPECT_EQ(CompleteUtf8PrefixLength("\x80\x80\x80\x80"), 4u);
}

}  // namespace
}  // namespace anymoe
