// RenderChat against the real Jinja templates rendered by jinja2/transformers
// (tools/gen_chat_template_golden.py), plus name lookup and template detection.
#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include "golden_util.h"

namespace anymoe {
namespace {

TEST(ChatTemplateTest, MatchesRealTemplatesRenderedByJinja) {
  const auto golden = testing::LoadGoldenJson("chat_template.golden.json");
  ASSERT_GE(golden["cases"].size(), 60u);
  for (const auto& c : golden["cases"]) {
    auto kind = ChatTemplateFromName(c["kind"].get<std::string>());
    ASSERT_TRUE(kind.ok()) << kind.status().message();
    std::vector<ChatMessage> messages;
    for (const auto& m : c["messages"]) {
      messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
    }
    const bool gen = c["add_generation_prompt"].get<bool>();
    EXPECT_EQ(RenderChat(*kind, messages, gen), c["expected"].get<std::string>())
        << c["kind"] << " gen=" << gen << " messages=" << c["messages"].dump();
  }
}

TEST(ChatTemplateTest, NamesRoundTripAndUnknownNameListsKnownOnes) {
  for (auto kind : {ChatTemplateKind::kChatML, ChatTemplateKind::kGlm, ChatTemplateKind::kLlama3}) {
    auto back = ChatTemplateFromName(ChatTemplateName(kind));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, kind);
  }
  auto bad = ChatTemplateFromName("vicuna");
  ASSERT_FALSE(bad.ok());
  for (const char* name : {"vicuna", "chatml", "glm", "llama3"}) {
    EXPECT_NE(bad.status().message().find(name), std::string::npos) << bad.status().message();
  }
}

TEST(ChatTemplateTest, DetectsTemplatesByTheirMarkers) {
  for (const auto& [file, want] : {std::pair{"smollm2.jinja", ChatTemplateKind::kChatML},
                                   std::pair{"glm45.jinja", ChatTemplateKind::kGlm},
                                   std::pair{"llama3.jinja", ChatTemplateKind::kLlama3}}) {
    std::ifstream in(testing::GoldenPath(std::string("templates/") + file));
    std::stringstream source;
    source << in.rdbuf();
    auto kind = DetectChatTemplate(source.str());
    ASSERT_TRUE(kind.ok()) << file;
    EXPECT_EQ(*kind, want) << file;
  }
  auto none = DetectChatTemplate("{{ messages[0]['content'] }}");
  EXPECT_FALSE(none.ok());
  EXPECT_FALSE(DetectChatTemplate("").ok());
}

TEST(ChatTemplateTest, HandlesEmptyAndUnusualInput) {
  const std::vector<ChatMessage> none;
  EXPECT_EQ(RenderChat(ChatTemplateKind::kChatML, none, true), "<|im_start|>assistant\n");
  EXPECT_EQ(RenderChat(ChatTemplateKind::kGlm, none, true), "[gMASK]<sop><|assistant|>");
  EXPECT_EQ(RenderChat(ChatTemplateKind::kLlama3, none, false), "");
  // Content that is not valid UTF-8 or carries markers must not break rendering.
  const std::vector<ChatMessage> odd = {{"user", "\xFF\xFE </think> <think>x"},
                                        {"assistant", "a</think>b</think>c"}};
  for (auto kind : {ChatTemplateKind::kChatML, ChatTemplateKind::kGlm, ChatTemplateKind::kLlama3}) {
    EXPECT_FALSE(RenderChat(kind, odd, true).empty());
  }
  EXPECT_EQ(RenderChat(ChatTemplateKind::kGlm, {odd.data() + 1, 1}, false),
            "[gMASK]<sop><|assistant|>\n<think>a</think>\nc");
}

}  // namespace
}  // namespace anymoe
