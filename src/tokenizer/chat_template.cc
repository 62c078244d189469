// Chat renderers written from the real templates (copies and their sources under
// tests/golden/tokenizer/templates/): SmolLM2-Instruct's ChatML, zai-org GLM-4.5/4.6
// and Meta-Llama-3-Instruct. Jinja's `trim` and Python's str.strip() are
// reproduced with Python's notion of whitespace.
#include "tokenizer/chat_template.h"

#include <array>

#include "tokenizer/unicode_class.h"

namespace anymoe {
namespace {

constexpr std::string_view kSmolLmDefaultSystem =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face";

struct NamedTemplate {
  std::string_view name;
  ChatTemplateKind kind;
};
constexpr std::array<NamedTemplate, 3> kNames = {{
    {"chatml", ChatTemplateKind::kChatML},
    {"glm", ChatTemplateKind::kGlm},
    {"llama3", ChatTemplateKind::kLlama3},
}};

// Python's str.strip() / lstrip() / rstrip() with no argument (Unicode isspace).
enum Side { kLeft = 1, kRight = 2, kBoth = 3 };
std::string_view PyStrip(std::string_view s, int sides = kBoth) {
  const std::vector<TextChar> chars = DecodeText(s);
  size_t first = 0, last = chars.size();
  const auto space = [](const TextChar& c) {
    return c.cp != kInvalidCodepoint && IsPythonSpace(c.cp);
  };
  if (sides & kLeft) {
    while (first < last && space(chars[first])) ++first;
  }
  if (sides & kRight) {
    while (last > first && space(chars[last - 1])) --last;
  }
  if (first == last) return {};
  const size_t begin = chars[first].offset;
  return s.substr(begin, chars[last - 1].offset + chars[last - 1].len - begin);
}

// Python's str.strip('\n') variants.
std::string_view StripNewlines(std::string_view s, int sides) {
  if (sides & kLeft) {
    while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  }
  if (sides & kRight) {
    while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  }
  return s;
}

// Appends template markup and message text, recording where the latter lies.
class ChatWriter {
 public:
  ChatWriter& Markup(std::string_view s) {
    out_.text += s;
    return *this;
  }
  ChatWriter& Message(std::string_view s) {
    if (s.empty()) return *this;
    const size_t begin = out_.text.size();
    out_.text += s;
    auto& ranges = out_.message_ranges;
    if (!ranges.empty() && ranges.back().end == begin) {
      ranges.back().end = out_.text.size();  // adjacent pieces merge
    } else {
      ranges.push_back({begin, out_.text.size()});
    }
    return *this;
  }
  RenderedChat Take() { return std::move(out_); }

 private:
  RenderedChat out_;
};

// {% if loop.first and messages[0]['role'] != 'system' %} default system prompt,
// then <|im_start|>role\ncontent<|im_end|>\n per message.
RenderedChat RenderChatMl(std::span<const ChatMessage> messages, bool add_generation_prompt) {
  ChatWriter w;
  if (!messages.empty() && messages[0].role != "system") {
    w.Markup("<|im_start|>system\n").Markup(kSmolLmDefaultSystem).Markup("<|im_end|>\n");
  }
  for (const ChatMessage& m : messages) {
    w.Markup("<|im_start|>").Message(m.role).Markup("\n").Message(m.content).Markup("<|im_end|>\n");
  }
  if (add_generation_prompt) w.Markup("<|im_start|>assistant\n");
  return w.Take();
}

// GLM-4.5's assistant turn: reasoning is taken from a <think>...</think> prefix of
// the content and only kept after the last user message.
void AppendGlmAssistant(const ChatMessage& m, bool after_last_user, ChatWriter& w) {
  w.Markup("<|assistant|>");
  std::string_view content = m.content;
  std::string_view reasoning;
  const size_t first_close = content.find("</think>");
  if (first_close != std::string_view::npos) {
    std::string_view before = StripNewlines(content.substr(0, first_close), kRight);
    const size_t open = before.rfind("<think>");
    if (open != std::string_view::npos) before = before.substr(open + 7);
    reasoning = StripNewlines(before, kLeft);
    const size_t last_close = content.rfind("</think>");
    content = StripNewlines(content.substr(last_close + 8), kLeft);
  }
  if (after_last_user && !reasoning.empty()) {
    w.Markup("\n<think>").Message(PyStrip(reasoning)).Markup("</think>");
  } else {
    w.Markup("\n<think></think>");
  }
  const std::string_view stripped = PyStrip(content);
  if (!stripped.empty()) w.Markup("\n").Message(stripped);
}

RenderedChat RenderGlm(std::span<const ChatMessage> messages, bool add_generation_prompt) {
  ChatWriter w;
  w.Markup("[gMASK]<sop>");
  int64_t last_user = -1;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].role == "user") last_user = static_cast<int64_t>(i);
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user") {
      w.Markup("<|user|>\n").Message(m.content);
    } else if (m.role == "assistant") {
      AppendGlmAssistant(m, static_cast<int64_t>(i) > last_user, w);
    } else if (m.role == "tool") {
      if (i == 0 || messages[i - 1].role != "tool") w.Markup("<|observation|>");
      w.Markup("\n<tool_response>\n").Message(m.content).Markup("\n</tool_response>");
    } else if (m.role == "system") {
      w.Markup("<|system|>\n").Message(m.content);
    }
  }
  if (add_generation_prompt) w.Markup("<|assistant|>");
  return w.Take();
}

RenderedChat RenderLlama3(std::span<const ChatMessage> messages, bool add_generation_prompt) {
  ChatWriter w;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (i == 0) w.Markup("<|begin_of_text|>");
    w.Markup("<|start_header_id|>").Message(messages[i].role).Markup("<|end_header_id|>\n\n");
    w.Message(PyStrip(messages[i].content)).Markup("<|eot_id|>");
  }
  if (add_generation_prompt) w.Markup("<|start_header_id|>assistant<|end_header_id|>\n\n");
  return w.Take();
}

}  // namespace

std::string_view ChatTemplateName(ChatTemplateKind kind) {
  for (const NamedTemplate& t : kNames) {
    if (t.kind == kind) return t.name;
  }
  return "?";
}

Expected<ChatTemplateKind> ChatTemplateFromName(std::string_view name) {
  for (const NamedTemplate& t : kNames) {
    if (t.name == name) return t.kind;
  }
  return Status::Error("unknown chat template '" + std::string(name) +
                       "'; known: chatml, glm, llama3");
}

Expected<ChatTemplateKind> DetectChatTemplate(std::string_view jinja_source) {
  if (jinja_source.find("<|im_start|>") != std::string_view::npos) return ChatTemplateKind::kChatML;
  if (jinja_source.find("<|start_header_id|>") != std::string_view::npos) {
    return ChatTemplateKind::kLlama3;
  }
  if (jinja_source.find("[gMASK]") != std::string_view::npos) return ChatTemplateKind::kGlm;
  return Status::Error(
      "chat template not recognised (no <|im_start|>, <|start_header_id|> or [gMASK]); "
      "choose one of: chatml, glm, llama3");
}

RenderedChat RenderChatWithRanges(ChatTemplateKind kind, std::span<const ChatMessage> messages,
                                  bool add_generation_prompt) {
  switch (kind) {
    case ChatTemplateKind::kChatML:
      return RenderChatMl(messages, add_generation_prompt);
    case ChatTemplateKind::kGlm:
      return RenderGlm(messages, add_generation_prompt);
    case ChatTemplateKind::kLlama3:
      return RenderLlama3(messages, add_generation_prompt);
  }
  return {};
}

std::string RenderChat(ChatTemplateKind kind, std::span<const ChatMessage> messages,
                       bool add_generation_prompt) {
  return RenderChatWithRanges(kind, messages, add_generation_prompt).text;
}

}  // namespace anymoe
