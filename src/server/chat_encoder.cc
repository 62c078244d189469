#include "server/chat_encoder.h"

#include "server/sse.h"

namespace anymoe {

namespace {
bool Blank(std::string_view s) { return s.find_first_not_of(" \t\r\n") == std::string_view::npos; }
}  // namespace

std::string SseEvent(std::string_view name, const nlohmann::json& data) {
  std::string out = "event: ";
  out += name;
  out += "\ndata: ";
  out += DumpJson(data);
  out += "\n\n";
  return out;
}

void OutputParts::Switch(Kind kind, size_t call, const ToolCallDelta* first, Sink& sink) {
  if (open_ == kind && (kind != Kind::kToolCall || open_call_ == call)) return;
  if (open_ != Kind::kNone) sink.ClosePart();
  pending_blank_.clear();
  open_ = kind;
  open_call_ = call;
  sink.OpenPart(kind, first);
}

void OutputParts::Feed(const ChatDelta& d, Sink& sink) {
  if (!d.reasoning.empty()) {
    Switch(Kind::kReasoning, 0, nullptr, sink);
    sink.AppendToPart(d.reasoning);
  }
  if (!d.content.empty()) {
    if (open_ != Kind::kText && Blank(pending_blank_ + d.content)) {
      pending_blank_ += d.content;
    } else {
      const std::string text = pending_blank_ + d.content;
      Switch(Kind::kText, 0, nullptr, sink);
      sink.AppendToPart(text);
    }
  }
  for (const ToolCallDelta& t : d.tool_calls) {
    if (!t.id.empty()) Switch(Kind::kToolCall, t.index, &t, sink);
    // Argument text of a call that is not the open one cannot be placed.
    if (!t.arguments.empty() && open_ == Kind::kToolCall && open_call_ == t.index) {
      sink.AppendToPart(t.arguments);
    }
  }
}

void OutputParts::Finish(Sink& sink) {
  if (open_ != Kind::kNone) sink.ClosePart();
  open_ = Kind::kNone;
}

}  // namespace anymoe
