// Fuzzed chat templates and model outputs. The input's first byte picks the
// target: a Jinja template (the rest of the input) parsed and rendered with a
// small conversation under small budgets, which must end with text or a
// one-line error; or generated text fed to the reasoning and tool-call
// parsers of a dialect whole and in 1..7-byte chunks, which must agree.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "chat/model_chat_template.h"
#include "chat/reasoning.h"
#include "chat/tool_calls.h"
#include "fuzz_input.h"

namespace {

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_jinja: %s\n", what);
    std::abort();
  }
}

void FuzzTemplate(std::string_view source) {
  auto t = anymoe::ModelChatTemplate::Parse(source, "<s>", "</s>");
  if (!t.ok()) {
    Check(t.status().message().find('\n') == std::string::npos, "multi-line parse error");
    return;
  }
  anymoe::ChatRenderRequest request;
  request.messages = nlohmann::ordered_json::parse(
      R"([{"role": "system", "content": "sys"}, {"role": "user", "content": "hi <|im_end|>"},
          {"role": "assistant", "content": "<think>r</think>a", "tool_calls": [{"type": "function",
           "function": {"name": "f", "arguments": {"x": 1, "y": "s"}}}]},
          {"role": "tool", "content": "out"}])");
  request.tools = nlohmann::ordered_json::parse(
      R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])");
  request.kwargs = {{"enable_thinking", false}};
  anymoe::jinja::RenderOptions options;
  options.limits.max_steps = 200000;
  options.limits.max_output_bytes = 1 << 20;
  options.limits.max_alloc_bytes = 32 << 20;
  auto r = t->Render(request, options);
  if (r.ok()) {
    Check(r->text.size() <= options.limits.max_output_bytes, "output over its limit");
    size_t last = 0;
    for (const auto& range : r->message_ranges) {
      Check(range.begin >= last && range.begin < range.end && range.end <= r->text.size(), "bad range");
      last = range.end;
    }
  } else {
    Check(r.status().message().find('\n') == std::string::npos, "multi-line render error");
  }
}

void FuzzParsers(uint8_t selector, std::string_view text) {
  const auto dialect = anymoe::ToolCallDialect(selector % 6);
  const bool in_reasoning = (selector >> 3) & 1;
  const size_t chunk = 1 + (selector >> 4) % 7;
  std::string whole_content, whole_reasoning, chunk_content, chunk_reasoning;
  std::string whole_args, chunk_args;
  for (int pass = 0; pass < 2; ++pass) {
    anymoe::ReasoningParser reasoning(in_reasoning);
    anymoe::ToolCallParser tools(dialect);
    std::string& content = pass == 0 ? whole_content : chunk_content;
    std::string& thought = pass == 0 ? whole_reasoning : chunk_reasoning;
    std::string& args = pass == 0 ? whole_args : chunk_args;
    const auto take = [&](const anymoe::ReasoningOutput& o) {
      thought += o.reasoning;
      const auto t = tools.Feed(o.content);
      content += t.content;
      for (const auto& d : t.deltas) args += d.name.empty() ? d.arguments : "|" + d.name + "|" + d.arguments;
    };
    const size_t step = pass == 0 ? text.size() + 1 : chunk;
    for (size_t i = 0; i < text.size(); i += step) take(reasoning.Feed(text.substr(i, step)));
    take(reasoning.Finish());
    const auto t = tools.Finish();
    content += t.content;
    for (const auto& d : t.deltas) args += d.name.empty() ? d.arguments : "|" + d.name + "|" + d.arguments;
  }
  Check(whole_content == chunk_content, "content differs by chunking");
  Check(whole_reasoning == chunk_reasoning, "reasoning differs by chunking");
  Check(whole_args == chunk_args, "tool calls differ by chunking");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2 || size > (64 << 10)) return 0;
  anymoe::fuzz::ByteReader in(data, size);
  const uint8_t selector = in.Byte();
  if (selector & 1) {
    FuzzTemplate(in.Rest());
  } else {
    FuzzParsers(selector >> 1, in.Rest());
  }
  return 0;
}
