// Golden model outputs (tools/gen_tool_call_golden.py: turns rendered by the
// real templates, plus hand-written edge cases) parsed by the reasoning and
// tool-call parsers, whole and streamed in every chunking from 1 byte to the
// whole text: every chunking gives the same reasoning, content and calls, and
// the calls are the conversation's (arguments compared as JSON text).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "chat/reasoning.h"
#include "chat/tool_calls.h"

namespace anymoe {
namespace {

using Json = nlohmann::ordered_json;

struct Result {
  std::string reasoning, content;
  std::vector<ToolCall> calls;  // rebuilt from the deltas
};

// Streams `text` in chunks of `chunk` bytes through reasoning then tool-call parsing.
Result Stream(const Json& c, size_t chunk) {
  const std::string text = c["text"].get<std::string>();
  ReasoningParser reasoning(c["starts_in_reasoning"].get<bool>());
  auto dialect = ToolCallDialectFromName(c["dialect"].get<std::string>());
  EXPECT_TRUE(dialect.ok());
  ToolCallParser tools(*dialect, c["tools"], "x");
  Result r;
  const auto take_tools = [&](const ToolCallOutput& o) {
    r.content += o.content;
    for (const ToolCallDelta& d : o.deltas) {
      if (d.index == r.calls.size()) {
        EXPECT_FALSE(d.name.empty()) << "the first delta of a call names it";
        EXPECT_FALSE(d.id.empty());
        r.calls.push_back({d.id, d.name, ""});
      } else {
        EXPECT_EQ(d.index + 1, r.calls.size()) << "deltas arrive in call order";
        EXPECT_TRUE(d.name.empty());
      }
      r.calls.back().arguments += d.arguments;
    }
  };
  const auto take = [&](const ReasoningOutput& o) {
    r.reasoning += o.reasoning;
    take_tools(tools.Feed(o.content));
  };
  for (size_t i = 0; i < text.size(); i += chunk) take(reasoning.Feed(std::string_view(text).substr(i, chunk)));
  take(reasoning.Finish());
  take_tools(tools.Finish());
  EXPECT_EQ(tools.calls().size(), r.calls.size());
  return r;
}

TEST(ToolCallGolden, EveryChunkingGivesTheSameCalls) {
  std::ifstream in(std::string(ANYMOE_GOLDEN_DIR) + "/chat/tool_calls.golden.json");
  std::stringstream s;
  s << in.rdbuf();
  const Json golden = Json::parse(s.str());
  size_t cases = 0, chunkings = 0;
  for (const Json& c : golden["cases"]) {
    const std::string name = c["name"].get<std::string>();
    const std::string text = c["text"].get<std::string>();
    const Result whole = Stream(c, text.size() + 1);
    const Json& want = c["expected_calls"];
    ASSERT_EQ(whole.calls.size(), want.size()) << name << ": " << text;
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(whole.calls[i].name, want[i]["name"].get<std::string>()) << name;
      EXPECT_EQ(whole.calls[i].arguments, want[i]["arguments"].get<std::string>()) << name;
      EXPECT_EQ(whole.calls[i].id, "call_x" + std::to_string(i));
    }
    if (c["check_content"].get<bool>()) {
      EXPECT_EQ(whole.content, c["expected_content"].get<std::string>()) << name;
      EXPECT_EQ(whole.reasoning, c["expected_reasoning"].get<std::string>()) << name;
    }
    for (size_t chunk = 1; chunk <= text.size(); ++chunk) {
      const Result r = Stream(c, chunk);
      ++chunkings;
      ASSERT_EQ(r.reasoning, whole.reasoning) << name << " chunk " << chunk;
      ASSERT_EQ(r.content, whole.content) << name << " chunk " << chunk;
      ASSERT_EQ(r.calls.size(), whole.calls.size()) << name << " chunk " << chunk;
      for (size_t i = 0; i < r.calls.size(); ++i) {
        ASSERT_EQ(r.calls[i].name, whole.calls[i].name) << name << " chunk " << chunk;
        ASSERT_EQ(r.calls[i].arguments, whole.calls[i].arguments) << name << " chunk " << chunk;
      }
    }
    ++cases;
  }
  std::printf("%zu golden outputs, %zu chunkings, all identical\n", cases, chunkings);
  EXPECT_GE(cases, 70u);
}

TEST(ToolCallDialect, DetectedFromTheTemplates) {
  const std::string dir = std::string(ANYMOE_GOLDEN_DIR) + "/chat/templates/";
  const auto read = [&](const char* f) {
    std::ifstream in(dir + f);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  };
  EXPECT_EQ(DetectToolCallDialect(read("glm-4.6.jinja")), ToolCallDialect::kGlm45);
  EXPECT_EQ(DetectToolCallDialect(read("glm-4.5.jinja")), ToolCallDialect::kGlm45);
  EXPECT_EQ(DetectToolCallDialect(read("glm-4.7-flash.jinja")), ToolCallDialect::kGlm47);
  EXPECT_EQ(DetectToolCallDialect(read("glm-5.2.jinja")), ToolCallDialect::kGlm47);
  EXPECT_EQ(DetectToolCallDialect(read("qwen3.jinja")), ToolCallDialect::kHermes);
  EXPECT_EQ(DetectToolCallDialect(read("hermes-3.jinja")), ToolCallDialect::kHermes);
  EXPECT_EQ(DetectToolCallDialect(read("llama-3.1.jinja")), ToolCallDialect::kLlama3Json);
  EXPECT_EQ(DetectToolCallDialect(read("deepseek-v3.1.jinja")), ToolCallDialect::kDeepSeekV3);
  EXPECT_EQ(DetectToolCallDialect(read("deepseek-r1-distill-qwen.jinja")), ToolCallDialect::kDeepSeekV3);
  EXPECT_EQ(DetectToolCallDialect(read("smollm2.jinja")), ToolCallDialect::kNone);
  EXPECT_FALSE(ToolCallDialectFromName("bogus").ok());
}

TEST(Reasoning, PromptOpensReasoning) {
  EXPECT_TRUE(PromptOpensReasoning("<|assistant|><think>"));
  EXPECT_TRUE(PromptOpensReasoning("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(PromptOpensReasoning("<|assistant|></think>"));
  EXPECT_FALSE(PromptOpensReasoning("<|assistant|><think></think>"));
  EXPECT_FALSE(PromptOpensReasoning("<|assistant|>"));
}

}  // namespace
}  // namespace anymoe
