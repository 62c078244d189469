// TextStream: text is released as soon as it cannot be part of a stop string or
// a split UTF-8 character, and generation text is cut before a stop string.
#include "runtime/text_stream.h"

#include <gtest/gtest.h>

namespace anymoe {
namespace {

TEST(TextStream, ReleasesPlainTextImmediately) {
  TextStream s({});
  EXPECT_EQ(s.Append("Hello"), "Hello");
  EXPECT_EQ(s.Append(" world"), " world");
  EXPECT_FALSE(s.stopped());
}

TEST(TextStream, HoldsBackIncompleteUtf8) {
  TextStream s({});
  const std::string euro = "\xE2\x82\xAC";
  EXPECT_EQ(s.Append("a" + euro.substr(0, 1)), "a");
  EXPECT_EQ(s.Append(euro.substr(1, 1)), "");
  EXPECT_EQ(s.Append(euro.substr(2, 1) + "b"), euro + "b");
}

TEST(TextStream, CutsAtStopStringSpanningPieces) {
  TextStream s({"</end>"});
  EXPECT_EQ(s.Append("answer </"), "answer ");
  EXPECT_EQ(s.Append("en"), "");
  EXPECT_EQ(s.Append("d> trailing"), "");
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(s.text(), "answer ");
}

TEST(TextStream, ReleasesHeldTextWhenTheStopDoesNotMaterialise) {
  TextStream s({"STOP"});
  EXPECT_EQ(s.Append("ST"), "");
  EXPECT_EQ(s.Append("AR"), "STAR");
  EXPECT_EQ(s.Append("S"), "");  // could start another STOP
  EXPECT_EQ(s.Append("!"), "S!");
  EXPECT_EQ(s.Flush(), "");
}

TEST(TextStream, FlushReleasesTheHeldTail) {
  TextStream s({"STOP"});
  EXPECT_EQ(s.Append("xST"), "x");
  EXPECT_EQ(s.Flush(), "ST");
}

TEST(TextStream, EarliestOfSeveralStopsWins) {
  TextStream s({"bb", "a"});
  s.Append("xxbbya");
  EXPECT_EQ(s.text(), "xx");
}

}  // namespace
}  // namespace anymoe
