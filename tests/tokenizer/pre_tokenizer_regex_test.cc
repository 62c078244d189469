// The generic regex pre-tokenizer against HF tokenizers' own engine: every
// shipped pattern table splits the 2,200-string corpus exactly where HF's Split
// does (goldens from tools/gen_pre_tokenizer_golden.py); the hand-written
// scanners split identically to their regexes run through PCRE2 (the corpus
// plus invalid UTF-8 and random bytes); hostile patterns and inputs fail with
// named errors in bounded time; every shipped pattern is linear on long runs.
#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include "golden_util.h"
#include "testing/scaling.h"
#include "tokenizer/pre_tokenizer_pipeline.h"
#include "tokenizer/regex_translate.h"

namespace anymoe {
namespace {

using Json = nlohmann::json;

std::vector<size_t> Ends(std::string_view text, const std::vector<std::string_view>& pieces) {
  std::vector<size_t> ends;
  for (std::string_view p : pieces) ends.push_back(size_t(p.data() + p.size() - text.data()));
  return ends;
}

std::vector<PreTokenizerStage> StagesOf(const Json& patterns) {
  std::vector<PreTokenizerStage> stages;
  for (const Json& p : patterns) stages.push_back(PreTokenizerStage::Split(p.get<std::string>()));
  return stages;
}

const Json& Golden() {
  static const Json golden = testing::LoadGoldenJson("pre_tokenizer_splits.json");
  return golden;
}

const Json& Corpus() {
  static const Json corpus = testing::LoadGoldenJson("corpus_large.json")["cases"];
  return corpus;
}

class RegexTableTest : public ::testing::TestWithParam<std::string> {};

// PCRE2 with translated classes == Oniguruma, string by string.
TEST_P(RegexTableTest, SplitsAsHfTokenizers) {
  const Json& table = Golden()["tables"][GetParam()];
  ASSERT_TRUE(table.is_object()) << GetParam();
  for (bool use_scanners : {false, true}) {
    auto pipeline = PreTokenizerPipeline::Build(StagesOf(table["patterns"]), use_scanners);
    ASSERT_TRUE(pipeline.ok()) << pipeline.status().message();
    const Json& corpus = Corpus();
    ASSERT_GE(corpus.size(), 2000u);
    int failures = 0;
    for (size_t i = 0; i < corpus.size() && failures < 5; ++i) {
      const std::string text = corpus[i]["text"];
      std::vector<std::string_view> pieces;
      ASSERT_TRUE(pipeline->Split(text, &pieces).ok());
      const auto want = table["ends"][i].get<std::vector<size_t>>();
      if (Ends(text, pieces) != want) {
        ++failures;
        ADD_FAILURE() << GetParam() << (use_scanners ? " (scanners)" : " (regex)") << " string "
                      << i << " [" << corpus[i]["category"].get<std::string>()
                      << "]: " << testing::Printable(text);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tables, RegexTableTest,
                         ::testing::Values("kDeepSeekV3", "kDeepSeekLlm", "kDeepSeekCoder",
                                           "kFalcon", "kGpt4o", "kTekken", "kQwen35", "kKimiK2",
                                           "gpt2", "llama3", "qwen2"));

// Text HF cannot take (invalid UTF-8, random bytes): scanner and regex agree.
TEST(PreTokenizerRegexTest, ScannersEqualTheirRegexOnAnyBytes) {
  std::mt19937 rng(47);
  std::vector<std::string> texts = {
      "a\xFF"
      "b",
      "\xC3",
      "\xE4\xB8",
      " \x80\x80 x",
      "'\xFFs",
      "1\xF0\x9F\x98 2",
      "\xED\xA0\x80 surrogate"};
  const std::string alphabet[] = {
      "a",           "Z", "1", " ",    "\n",       "\r",           "\t",
      "'",           "s", "!", "\xFF", "\xC3\xA9", "\xE4\xB8\xAD", "\xF0\x9F\x98\x80",
      "\xE2\x80\x83",
      // Kimi's classes: Han (an ideograph, U+3005 Lm, U+302A Mn, U+3007 Nl,
      // a radical So), Lu, Lt, Lm, Lo, a combining mark, Arabic, long s.
      "\xE4\xB8\xAD", "\xE3\x80\x85", "\xE3\x80\xAA", "\xE3\x80\x87", "\xE2\xBA\x80",
      "\xC3\x89", "\xC7\x85", "\xCA\xB0", "\xD8\xA8", "\xCC\x81", "\xC5\xBF"};
  for (int n = 0; n < 3000; ++n) {
    std::string t;
    const int len = int(rng() % 24);
    for (int k = 0; k < len; ++k) t += alphabet[rng() % std::size(alphabet)];
    texts.push_back(t);
  }
  for (const Json& c : Corpus()) texts.push_back(c["text"]);
  const std::pair<PreTokenizerKind, std::string_view> scanners[] = {
      {PreTokenizerKind::kGpt2, Gpt2SplitRegex()},
      {PreTokenizerKind::kLlama3, Llama3SplitRegex()},
      {PreTokenizerKind::kQwen2, Qwen2SplitRegex()},
      {PreTokenizerKind::kKimiK2, KimiK2SplitRegex()}};
  for (const auto& [kind, regex] : scanners) {
    auto splitter = RegexSplitter::Compile(regex, SplitBehavior::kIsolated, false);
    ASSERT_TRUE(splitter.ok()) << splitter.status().message();
    for (const std::string& t : texts) {
      std::vector<std::string_view> a, b;
      PreTokenize(kind, t, &a);
      ASSERT_TRUE(splitter->Split(t, &b).ok());
      ASSERT_EQ(Ends(t, a), Ends(t, b)) << PreTokenizerName(kind) << ": " << testing::Printable(t);
    }
  }
}

TEST(PreTokenizerRegexTest, CatastrophicPatternFailsAtLoadWithANamedError) {
  const auto start = std::chrono::steady_clock::now();
  auto splitter = RegexSplitter::Compile("(a+)+$", SplitBehavior::kIsolated, false);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(splitter.ok());
  EXPECT_EQ(splitter.status().code(), "tokenizer_regex_rejected");
  EXPECT_NE(splitter.status().message().find("limit"), std::string::npos)
      << splitter.status().message();
  EXPECT_LT(seconds, 1.0);
}

TEST(PreTokenizerRegexTest, RequestThatHitsALimitFailsAloneInBoundedTime) {
  // Harmless on the load-time probes (no 'x' in them), exponential on x...x.
  auto splitter = RegexSplitter::Compile("(x+x+)+y|a", SplitBehavior::kIsolated, false);
  ASSERT_TRUE(splitter.ok()) << splitter.status().message();
  std::vector<std::string_view> pieces;
  EXPECT_TRUE(splitter->Split("a b a", &pieces).ok());
  const auto start = std::chrono::steady_clock::now();
  pieces.clear();
  const Status st = splitter->Split(std::string(64, 'x'), &pieces);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), "tokenizer_regex_limit");
  EXPECT_EQ(st.kind(), ErrorKind::kInvalidArgument);
  EXPECT_LT(seconds, 1.0);
  pieces.clear();
  EXPECT_TRUE(splitter->Split("a a", &pieces).ok());  // the next request is served
}

TEST(PreTokenizerRegexTest, RejectedPatternsNameTheProblem) {
  for (std::string_view bad : {"(", "[a-", "\\p{NoSuchProperty}", "a{2,1}", "[z-a]", "\\"}) {
    auto splitter = RegexSplitter::Compile(bad, SplitBehavior::kIsolated, false);
    ASSERT_FALSE(splitter.ok()) << bad;
    EXPECT_EQ(splitter.status().code(), "tokenizer_regex_rejected") << bad;
    EXPECT_FALSE(splitter.status().message().empty());
  }
  EXPECT_FALSE(TranslateOnigurumaPattern(std::string(kMaxPreTokenizerPatternBytes + 1, 'a')).ok());
}

TEST(PreTokenizerRegexTest, RemovedBehaviorAndInvert) {
  auto removed = RegexSplitter::Compile("\\s+", SplitBehavior::kRemoved, false);
  ASSERT_TRUE(removed.ok());
  std::vector<std::string_view> pieces;
  ASSERT_TRUE(removed->Split("a  b\tc", &pieces).ok());
  EXPECT_EQ(pieces, (std::vector<std::string_view>{"a", "b", "c"}));
  auto inverted = RegexSplitter::Compile("\\s+", SplitBehavior::kRemoved, true);
  ASSERT_TRUE(inverted.ok());
  pieces.clear();
  ASSERT_TRUE(inverted->Split("a  b\tc", &pieces).ok());
  EXPECT_EQ(pieces, (std::vector<std::string_view>{"  ", "\t"}));
}

// Oniguruma (Ruby syntax) escapes PCRE2 reads differently.
TEST(PreTokenizerRegexTest, RubyEscapes) {
  const auto split = [](std::string_view pattern, std::string_view text) {
    auto s = RegexSplitter::Compile(pattern, SplitBehavior::kRemoved, true);
    EXPECT_TRUE(s.ok()) << s.status().message();
    std::vector<std::string_view> pieces;
    if (s.ok()) {
      EXPECT_TRUE(s->Split(text, &pieces).ok());
    }
    return std::vector<std::string>(pieces.begin(), pieces.end());
  };
  EXPECT_EQ(split("\\h+", "zz0aF9g"), (std::vector<std::string>{"0aF9"}));  // hex digit
  EXPECT_EQ(split("\\v",
                  "a\x0b"
                  "b\nc"),
            (std::vector<std::string>{"\x0b"}));
  EXPECT_EQ(split("x$", "ax\nbx"), (std::vector<std::string>{"x", "x"}));  // line anchor
  EXPECT_EQ(split("[a-z&&[^aeiou]]+", "bcdaxyz"), (std::vector<std::string>{"bcd", "xyz"}));
  EXPECT_EQ(split("[\\p{L}&&[^\\p{Han}]]+", "ab中cd"), (std::vector<std::string>{"ab", "cd"}));
}

// Linear time on 1 MiB runs of one character class (against 256 KiB: linear
// work gives ~4x, quadratic ~16x; the bound of 8x holds on a loaded machine
// because the helper compares thread CPU times and remeasures), for every
// shipped table.
TEST(PreTokenizerRegexTest, EveryShippedPatternIsLinearOnLongRuns) {
  const std::string units[] = {"a", "A", "7", " ", "\n", "!", "\xE4\xB8\xAD"};
  for (const auto& [name, table] : Golden()["tables"].items()) {
    auto pipeline = PreTokenizerPipeline::Build(StagesOf(table["patterns"]), false);
    ASSERT_TRUE(pipeline.ok()) << name;
    for (const std::string& unit : units) {
      std::string quarter, whole;
      while (quarter.size() < (size_t{256} << 10)) quarter += unit;
      for (int k = 0; k < 4; ++k) whole += quarter;
      quarter += "x1 ";
      whole += "x1 ";
      std::vector<std::string_view> pieces;
      testing::GrowthOptions options;
      options.repeats = 1;
      testing::ExpectLinearGrowth(
          name + " on a run of " + testing::Printable(unit),
          [&](int scale) {
            pieces.clear();
            const Status st = pipeline->Split(scale == 1 ? quarter : whole, &pieces);
            EXPECT_TRUE(st.ok()) << name << " / " << testing::Printable(unit) << ": "
                                 << st.message();
          },
          options);
    }
  }
}

// The Kimi K2 scanner gives back upper-only letters when no lower one follows
// (upper*lower+): linear all the same on 1 MiB runs of each of its classes, and
// of a letter that is both (Arabic) before a run of capitals.
TEST(PreTokenizerRegexTest, KimiScannerIsLinearOnLongRuns) {
  const std::string units[] = {"A", "a", "\xD8\xA8", "\xCC\x81", "\xE4\xB8\xAD", " ", "!",
                               "7", "A\xD8\xA8", "\xC7\x85"};
  for (const std::string& unit : units) {
    std::string quarter = "\xD8\xA8", whole = "\xD8\xA8";
    while (quarter.size() < (size_t{256} << 10)) quarter += unit;
    while (whole.size() < (size_t{1} << 20)) whole += unit;
    std::vector<std::string_view> pieces;
    testing::GrowthOptions options;
    options.repeats = 1;
    testing::ExpectLinearGrowth(
        "kimi-k2 scanner on a run of " + testing::Printable(unit),
        [&](int scale) {
          pieces.clear();
          PreTokenize(PreTokenizerKind::kKimiK2, scale == 1 ? quarter : whole, &pieces);
        },
        options);
  }
}

// The goldens were generated from the tables in pre_tokenizer_pipeline.cc: a
// table edited without regenerating them fails here, not silently.
TEST(PreTokenizerRegexTest, GgufTablesAreThePatternsTheGoldensWereMadeFrom) {
  const std::pair<std::string_view, std::string_view> names[] = {
      {"deepseek-v3", "kDeepSeekV3"},
      {"deepseek-llm", "kDeepSeekLlm"},
      {"deepseek-coder", "kDeepSeekCoder"},
      {"falcon", "kFalcon"},
      {"gpt-4o", "kGpt4o"},
      {"llama4", "kGpt4o"},
      {"tekken", "kTekken"},
      {"qwen35", "kQwen35"},
      {"kimi-k2", "kKimiK2"}};
  for (const auto& [gguf_name, table] : names) {
    auto stages = PreTokenizerStagesForGgufName(gguf_name);
    ASSERT_TRUE(stages.ok()) << gguf_name;
    std::vector<std::string> patterns;
    for (const PreTokenizerStage& s : *stages) {
      EXPECT_EQ(s.type, PreTokenizerStage::Type::kSplit) << gguf_name;
      patterns.push_back(s.pattern);
    }
    EXPECT_EQ(patterns,
              Golden()["tables"][std::string(table)]["patterns"].get<std::vector<std::string>>())
        << gguf_name;
  }
  // The scanner names: each is exactly one scanner stage.
  for (std::string_view gguf_name : {"gpt2", "llama-bpe", "glm4", "qwen2", "smollm"}) {
    auto stages = PreTokenizerStagesForGgufName(gguf_name);
    ASSERT_TRUE(stages.ok()) << gguf_name;
    ASSERT_EQ(stages->size(), 1u) << gguf_name;
    EXPECT_EQ(stages->front().type, PreTokenizerStage::Type::kScanner) << gguf_name;
  }
  EXPECT_EQ(Golden()["tables"]["gpt2"]["patterns"][0].get<std::string>(), Gpt2SplitRegex());
  EXPECT_EQ(Golden()["tables"]["llama3"]["patterns"][0].get<std::string>(), Llama3SplitRegex());
  EXPECT_EQ(Golden()["tables"]["qwen2"]["patterns"][0].get<std::string>(), Qwen2SplitRegex());
  EXPECT_EQ(Golden()["tables"]["kKimiK2"]["patterns"][0].get<std::string>(), KimiK2SplitRegex());
}

}  // namespace
}  // namespace anymoe
