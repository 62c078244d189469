// Chat-template rendering is bounded (reliability.md B5): the built-in
// renderers run no template code from the model, so output grows linearly
// with the input (a fixed overhead per message) and rendering the largest
// conversation a request may carry takes milliseconds, for every template.
#include <gtest/gtest.h>

#include <ctime>
#include <string>
#include <vector>

#include "tokenizer/chat_template.h"

namespace anymoe {
namespace {

// CPU seconds to render `messages` (CPU time: the test machine may be busy).
double RenderSeconds(ChatTemplateKind kind, const std::vector<ChatMessage>& messages,
                     size_t* out_bytes) {
  const std::clock_t start = std::clock();
  *out_bytes = RenderChat(kind, messages, true).size();
  return double(std::clock() - start) / CLOCKS_PER_SEC;
}

TEST(ChatTemplateBounds, OutputAndTimeAreLinearInTheInput) {
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
  const std::vector<ChatMessage> half(messages.begin(), messages.begin() + 2048);
  for (ChatTemplateKind kind : {ChatTemplateKind::kChatML, ChatTemplateKind::kGlm,
                                ChatTemplateKind::kLlama3}) {
    SCOPED_TRACE(std::string(ChatTemplateName(kind)));
    size_t out = 0, half_out = 0;
    const double t_half = RenderSeconds(kind, half, &half_out);
    const double t_full = RenderSeconds(kind, messages, &out);
    EXPECT_LE(out, input + 256 * (messages.size() + 1));
    EXPECT_LT(t_full, 3 * t_half + 0.05);  // linear: 2x; quadratic: 4x
    EXPECT_LT(t_full, 2.0);  // ~0.1 s in a release build
  }
}

}  // namespace
}  // namespace anymoe
