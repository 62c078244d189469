#include "server/responses_format.h"

#include <ctime>

namespace anymoe {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

bool Incomplete(const ChatFinish& f) {
  return f.reason == StopReason::kMaxTokens || f.reason == StopReason::kContextFull;
}

// A request field echoed as given, or `fallback`.
json Echo(const ojson& request, const char* key, json fallback) {
  auto it = request.is_object() ? request.find(key) : request.end();
  if (it == request.end() || it->is_null()) return fallback;
  return json::parse(it->dump());
}

}  // namespace

json ResponsesUsage(const Usage& u) {
  return {{"input_tokens", u.prompt_tokens},
          {"input_tokens_details", {{"cached_tokens", u.cached_tokens}}},
          {"output_tokens", u.completion_tokens},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

ResponsesEncoder::ResponsesEncoder(std::string id, std::string model, const ojson& request)
    : id_(std::move(id)), model_(std::move(model)), created_(int64_t(std::time(nullptr))) {
  json reasoning = {{"effort", nullptr}, {"summary", nullptr}};
  if (auto r = Echo(request, "reasoning", nullptr); r.is_object() && r.contains("effort")) {
    reasoning["effort"] = r["effort"];
  }
  echo_ = {{"instructions", Echo(request, "instructions", nullptr)},
           {"max_output_tokens", Echo(request, "max_output_tokens", nullptr)},
           {"metadata", Echo(request, "metadata", json::object())},
           {"parallel_tool_calls", Echo(request, "parallel_tool_calls", true)},
           {"previous_response_id", nullptr},
           {"reasoning", std::move(reasoning)},
           {"store", false},
           {"temperature", Echo(request, "temperature", 1.0)},
           {"text", Echo(request, "text", {{"format", {{"type", "text"}}}})},
           {"tool_choice", Echo(request, "tool_choice", "auto")},
           {"tools", Echo(request, "tools", json::array())},
           {"top_p", Echo(request, "top_p", 1.0)},
           {"truncation", "disabled"}};
}

json ResponsesEncoder::Response(std::string_view status, const ChatFinish* finish) const {
  json r = {{"id", id_},
            {"object", "response"},
            {"created_at", created_},
            {"status", status},
            {"error", nullptr},
            {"incomplete_details", nullptr},
            {"model", model_},
            {"output", output_},
            {"usage", nullptr}};
  r.update(echo_);
  if (finish != nullptr) {
    r["usage"] = ResponsesUsage(finish->usage);
    if (Incomplete(*finish)) r["incomplete_details"] = {{"reason", "max_output_tokens"}};
  }
  return r;
}

void ResponsesEncoder::Emit(const char* type, json event) {
  event["type"] = type;
  event["sequence_number"] = sequence_++;
  events_ += SseEvent(type, event);
}

std::string ResponsesEncoder::Open(const Usage&) {
  Emit("response.created", {{"response", Response("in_progress", nullptr)}});
  Emit("response.in_progress", {{"response", Response("in_progress", nullptr)}});
  return std::exchange(events_, std::string());
}

std::string& ResponsesEncoder::OpenText() {
  json& item = output_.back();
  if (item["type"] == "function_call") return item["arguments"].get_ref<std::string&>();
  return item["content"][0]["text"].get_ref<std::string&>();
}

void ResponsesEncoder::OpenPart(OutputParts::Kind kind, const ToolCallDelta* call) {
  const std::string serial = id_.substr(5) + "_" + std::to_string(item_serial_++);
  json item;
  json part;  // the content part a message or reasoning item holds
  switch (kind) {
    case OutputParts::Kind::kReasoning:
      item = {{"id", "rs_" + serial}, {"type", "reasoning"}, {"summary", json::array()}};
      part = {{"type", "reasoning_text"}, {"text", ""}};
      break;
    case OutputParts::Kind::kToolCall:
      item = {{"id", "fc_" + serial},
              {"type", "function_call"},
              {"status", "in_progress"},
              {"call_id", call->id},
              {"name", call->name},
              {"arguments", ""}};
      break;
    case OutputParts::Kind::kText:
    case OutputParts::Kind::kNone:
      item = {{"id", "msg_" + serial},
              {"type", "message"},
              {"status", "in_progress"},
              {"role", "assistant"},
              {"content", json::array()}};
      part = {{"type", "output_text"}, {"text", ""}, {"annotations", json::array()},
              {"logprobs", json::array()}};
      break;
  }
  const size_t index = output_.size();
  // The reasoning item's text is its content from the start: the SDK adds
  // only message parts from content_part.added.
  if (kind == OutputParts::Kind::kReasoning) item["content"] = json::array({part});
  Emit("response.output_item.added", {{"output_index", index}, {"item", item}});
  output_.push_back(std::move(item));
  if (kind == OutputParts::Kind::kText) {
    Emit("response.content_part.added", {{"item_id", output_.back()["id"]},
                                         {"output_index", index},
                                         {"content_index", 0},
                                         {"part", part}});
    output_.back()["content"].push_back(std::move(part));
  }
}

void ResponsesEncoder::AppendToPart(std::string_view text) {
  json& item = output_.back();
  OpenText() += text;
  json event = {{"item_id", item["id"]}, {"output_index", output_.size() - 1}, {"delta", text}};
  if (item["type"] == "function_call") {
    Emit("response.function_call_arguments.delta", std::move(event));
    return;
  }
  event["content_index"] = 0;
  if (item["type"] == "message") {
    event["logprobs"] = json::array();
    Emit("response.output_text.delta", std::move(event));
  } else {
    Emit("response.reasoning_text.delta", std::move(event));
  }
}

void ResponsesEncoder::ClosePart() {
  json& item = output_.back();
  const size_t index = output_.size() - 1;
  json done = {{"item_id", item["id"]}, {"output_index", index}};
  if (item.contains("status")) item["status"] = cut_short_ ? "incomplete" : "completed";
  if (item["type"] == "function_call") {
    done["arguments"] = item["arguments"];
    done["name"] = item["name"];
    Emit("response.function_call_arguments.done", std::move(done));
  } else {
    done["content_index"] = 0;
    done["text"] = OpenText();
    if (item["type"] == "message") {
      done["logprobs"] = json::array();
      Emit("response.output_text.done", done);
      done.erase("text");
      done.erase("logprobs");
      done["part"] = item["content"][0];
      Emit("response.content_part.done", std::move(done));
    } else {
      Emit("response.reasoning_text.done", std::move(done));
    }
  }
  Emit("response.output_item.done", {{"output_index", index}, {"item", item}});
}

std::string ResponsesEncoder::Delta(const ChatDelta& d) {
  parts_.Feed(d, *this);
  return std::exchange(events_, std::string());
}

std::string ResponsesEncoder::Close(const ChatFinish& finish) {
  const bool incomplete = Incomplete(finish);
  cut_short_ = incomplete;
  parts_.Finish(*this);
  Emit(incomplete ? "response.incomplete" : "response.completed",
       {{"response", Response(incomplete ? "incomplete" : "completed", &finish)}});
  return std::exchange(events_, std::string());
}

json ResponsesEncoder::Body(const ChatFinish& finish) const {
  return Response(Incomplete(finish) ? "incomplete" : "completed", &finish);
}

std::string ResponsesEncoder::StreamError(const ApiError& error) const {
  json e = {{"type", "error"},
            {"sequence_number", sequence_},
            {"code", error.code.empty() ? json(nullptr) : json(error.code)},
            {"message", error.message},
            {"param", error.param.empty() ? json(nullptr) : json(error.param)}};
  return SseEvent("error", e);
}

std::string_view ResponsesEncoder::Ping() const { return ": ping\n\n"; }

}  // namespace anymoe
