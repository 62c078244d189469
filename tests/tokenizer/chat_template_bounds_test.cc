// Chat-template rendering is bounded (reliability.md B5): the built-in
// renderers run no template code from the model, so output grows linearly
// with the input (a fixed overhead per message) and rendering the largest
// conversation a request may carry takes milliseconds, for every template.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "tokenizer/chat_template.h"

namespace anymoe {
namespace {

TEST(ChatTemplateBounds, OutputIsLinearInTheInputAndFast) {
  // 4096 messages (the server's cap) of 256 bytes: the 1 MiB body limit.
  std::vector<ChatMessage> messages;
  size_t input = 0;
  const char* const roles[] = {"system", "user", "assistant", "tool"};
  for (int i = 0; i < 4096; ++i) {
    std::string content(256, "a <think>\n"[i % 10]);
    if (i % 7 == 0) content = "<think>" + content + "</think>" + content;
    messages.push_back({roles[i % 4], content});
    input += messages.back().role.size() + messages.back().content.size();
  }
  for (ChatTemplateKind kind : {ChatTemplateKind::kChatML, ChatTemplateKind::kGlm,
                                ChatTemplateKind::kLlama3}) {
    SCOPED_TRACE(std::string(ChatTemplateName(kind)));
    const auto start = std::chrono::steady_clock::now();
    const std::string out = RenderChat(kind, messages, true);
    const double ms = std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - start).count();
    EXPECT_LE(out.size(), input + 256 * (messages.size() + 1));
    EXPECT_LT(ms, 500.0);  // ~1 MiB of text; a few ms in a release build
  }
}

}  // namespace
}  // namespace anymoe
