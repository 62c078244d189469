// B7: fuzzed conversations (roles, contents with template markers, <think>
// tags, invalid UTF-8, many messages) rendered with every built-in template,
// then encoded as the server does. Checked: rendering is bounded by the input
// (output <= input bytes + a fixed overhead per message, so no template can
// blow up) and takes linear time; template detection on arbitrary text never
// crashes.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace {

using anymoe::ChatMessage;
using anymoe::ChatTemplateKind;

const anymoe::Tokenizer& SmolTokenizer() {
  static const std::unique_ptr<anymoe::Tokenizer> tok = [] {
    const std::string dir = anymoe::fuzz::GoldenDir() + "/tokenizer/";
    auto t = anymoe::Tokenizer::FromHfJson(dir + "smollm2_small.tokenizer.json",
                                           dir + "smollm2_small.tokenizer_config.json");
    if (!t.ok()) {
      std::fprintf(stderr, "fuzz_chat_template: %s\n", t.status().message().c_str());
      std::abort();
    }
    return std::move(t).value();
  }();
  return *tok;
}

// Fixed text a template adds around one message (markers, role, default
// system prompt), generously rounded up.
constexpr size_t kOverheadPerMessage = 256;

std::string PickRole(anymoe::fuzz::ByteReader& in) {
  static const char* const kRoles[] = {"system", "user", "assistant", "tool"};
  if (in.Bool()) return kRoles[in.Below(4)];
  return in.String(16);  // the renderer must cope with any role text
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::string storage;
  const std::string_view expanded = anymoe::fuzz::ExpandInput(data, size, 256 << 10, &storage);
  data = reinterpret_cast<const uint8_t*>(expanded.data());
  size = expanded.size();
  if (size > (256 << 10)) return 0;
  const anymoe::fuzz::CpuBudget budget("fuzz_chat_template");
  anymoe::fuzz::ByteReader in(data, size);
  const auto kind = ChatTemplateKind(in.Below(3));
  const bool generation_prompt = in.Bool();
  std::vector<ChatMessage> messages;
  size_t input_bytes = 0;
  while (in.remaining() > 0 && messages.size() < 256) {
    ChatMessage m;
    m.role = PickRole(in);
    m.content = in.String(4096);
    input_bytes += m.role.size() + m.content.size();
    messages.push_back(std::move(m));
  }
  const std::string out = anymoe::RenderChat(kind, messages, generation_prompt);
  if (out.size() > input_bytes + kOverheadPerMessage * (messages.size() + 1)) {
    std::fprintf(stderr, "fuzz_chat_template: %zu bytes out of %zu in\n", out.size(), input_bytes);
    std::abort();
  }
  (void)anymoe::DetectChatTemplate(out);
  (void)anymoe::ChatTemplateFromName(messages.empty() ? "" : messages[0].content);
  const std::vector<int32_t> ids = SmolTokenizer().Encode(out, false, true);
  (void)SmolTokenizer().Decode(ids);
  return 0;
}
