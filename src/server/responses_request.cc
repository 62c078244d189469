#include "server/responses_request.h"

#include <set>
#include <string>

#include "chat/tool_calls.h"
#include "server/json_fields.h"

namespace anymoe {
namespace {

using ojson = nlohmann::ordered_json;

// A message's content: a string or input_text / output_text parts (joined).
std::optional<ApiError> ReadContentText(const ojson& v, const std::string& name,
                                        std::string* out) {
  return ReadTextParts(v, name, {"input_text", "output_text", "text"}, out);
}

// The conversation so far, as chat messages: function calls (and reasoning)
// join the assistant message before them, or start one.
class InputReader {
 public:
  explicit InputReader(ojson* messages) : messages_(*messages) {}

  std::optional<ApiError> Item(const ojson& item, const std::string& name) {
    if (!item.is_object()) return InvalidField(name, name + " must be an object", "invalid_type");
    std::string type = "message";
    RETURN_IF_API_ERROR(ReadString(item, "type", name + ".type", &type));
    if (type == "message") return Message(item, name);
    if (type == "function_call") return Call(item, name);
    if (type == "function_call_output") return Output(item, name);
    if (type == "reasoning") return Reasoning(item, name);
    return InvalidField(name + ".type", name + ".type must be message, function_call, "
                                               "function_call_output or reasoning");
  }

 private:
  std::optional<ApiError> Message(const ojson& item, const std::string& name) {
    std::string role, text;
    RETURN_IF_API_ERROR(ReadString(item, "role", name + ".role", &role, /*required=*/true));
    if (role == "developer") role = "system";
    if (role != "user" && role != "assistant" && role != "system") {
      return InvalidField(name + ".role", name + ".role must be user, assistant, system or developer");
    }
    const ojson* content = Field(item, "content");
    if (content == nullptr) return InvalidField(name + ".content", name + ".content is required");
    RETURN_IF_API_ERROR(ReadContentText(*content, name + ".content", &text));
    if (role == "assistant") {
      ojson& m = Assistant(/*fresh=*/true);
      m["content"] = text;
      return std::nullopt;
    }
    messages_.push_back({{"role", role}, {"content", text}});
    return std::nullopt;
  }

  std::optional<ApiError> Call(const ojson& item, const std::string& name) {
    std::string call_id, function, arguments;
    RETURN_IF_API_ERROR(ReadString(item, "call_id", name + ".call_id", &call_id, true));
    RETURN_IF_API_ERROR(ReadString(item, "name", name + ".name", &function, true));
    RETURN_IF_API_ERROR(ReadString(item, "arguments", name + ".arguments", &arguments, true));
    if (call_id.empty() || !call_ids_.insert(call_id).second) {
      return InvalidField(name + ".call_id", name + ".call_id must be non-empty and unique");
    }
    ojson args = ParseJsonLimited(arguments, 32);
    if (!args.is_object()) {
      return InvalidField(name + ".arguments", name + ".arguments must be a JSON object's text");
    }
    ojson& m = Assistant(/*fresh=*/false);
    if (!m.contains("tool_calls")) m["tool_calls"] = ojson::array();
    m["tool_calls"].push_back({{"id", call_id},
                               {"type", "function"},
                               {"function", {{"name", function}, {"arguments", std::move(args)}}}});
    return std::nullopt;
  }

  std::optional<ApiError> Output(const ojson& item, const std::string& name) {
    std::string call_id, output;
    RETURN_IF_API_ERROR(ReadString(item, "call_id", name + ".call_id", &call_id, true));
    if (call_ids_.count(call_id) == 0) {
      return InvalidField(name + ".call_id",
                          name + ".call_id names no function_call item before it",
                          "unknown_call_id");
    }
    const ojson* o = Field(item, "output");
    if (o == nullptr) return InvalidField(name + ".output", name + ".output is required");
    RETURN_IF_API_ERROR(ReadContentText(*o, name + ".output", &output));
    messages_.push_back({{"role", "tool"}, {"tool_call_id", call_id}, {"content", output}});
    return std::nullopt;
  }

  // Reasoning text (content reasoning_text parts, else the summary) goes to
  // the next assistant message, as reasoning_content.
  std::optional<ApiError> Reasoning(const ojson& item, const std::string& name) {
    std::string text;
    for (const char* key : {"content", "summary"}) {
      const ojson* parts = Field(item, key);
      if (parts == nullptr) continue;
      const std::string pn = name + "." + key;
      if (!parts->is_array()) return InvalidField(pn, pn + " must be an array", "invalid_type");
      for (size_t i = 0; i < parts->size(); ++i) {
        std::string t;
        RETURN_IF_API_ERROR(ReadString((*parts)[i], "text", Indexed(pn, i) + ".text", &t, true));
        text += t;
      }
      if (!text.empty()) break;
    }
    ojson& m = Assistant(/*fresh=*/true);
    m["reasoning_content"] = text;
    reasoning_open_ = true;
    return std::nullopt;
  }

  // The assistant message to add to: the last one when it is still open
  // (nothing but its calls after it), else a new one. `fresh`: a message
  // item or reasoning starts a new turn unless reasoning just opened it.
  ojson& Assistant(bool fresh) {
    const bool reuse = !messages_.empty() && messages_.back()["role"] == "assistant" &&
                       (fresh ? reasoning_open_ : true);
    reasoning_open_ = false;
    if (!reuse) messages_.push_back({{"role", "assistant"}, {"content", ""}});
    return messages_.back();
  }

  ojson& messages_;
  std::set<std::string> call_ids_;
  bool reasoning_open_ = false;
};

std::optional<ApiError> ReadInput(const ojson& body, const ResponsesLimits& limits, ojson* chat) {
  ojson messages = ojson::array();
  std::string instructions;
  RETURN_IF_API_ERROR(ReadString(body, "instructions", "instructions", &instructions));
  if (!instructions.empty()) messages.push_back({{"role", "system"}, {"content", instructions}});
  const ojson* input = Field(body, "input");
  if (input == nullptr) return InvalidField("input", "input is required");
  if (input->is_string()) {
    messages.push_back({{"role", "user"}, {"content", *input}});
  } else if (input->is_array()) {
    if (input->empty()) return InvalidField("input", "input must not be empty");
    if (input->size() > limits.max_items) {
      return InvalidField("input", "more than " + std::to_string(limits.max_items) + " items");
    }
    InputReader reader(&messages);
    for (size_t i = 0; i < input->size(); ++i) {
      RETURN_IF_API_ERROR(reader.Item((*input)[i], Indexed("input", i)));
    }
  } else {
    return InvalidField("input", "input must be a string or an array of items", "invalid_type");
  }
  (*chat)["messages"] = std::move(messages);
  return std::nullopt;
}

std::optional<ApiError> ReadTools(const ojson& body, const ResponsesLimits& limits, ojson* chat) {
  const ojson* v = nullptr;
  RETURN_IF_API_ERROR(ReadArray(body, "tools", limits.max_tools, /*required=*/false, &v));
  if (v != nullptr) {
    ojson tools = ojson::array();
    for (size_t i = 0; i < v->size(); ++i) {
      const ojson& t = (*v)[i];
      const std::string tn = Indexed("tools", i);
      std::string type, name, description;
      if (!t.is_object()) return InvalidField(tn, tn + " must be an object", "invalid_type");
      RETURN_IF_API_ERROR(ReadString(t, "type", tn + ".type", &type, /*required=*/true));
      if (type != "function") {
        return InvalidField(tn + ".type", tn + ".type: only \"function\" tools are supported");
      }
      RETURN_IF_API_ERROR(ReadString(t, "name", tn + ".name", &name, /*required=*/true));
      RETURN_IF_API_ERROR(ReadString(t, "description", tn + ".description", &description));
      ojson function = {{"name", name}};
      if (!description.empty()) function["description"] = description;
      if (const ojson* p = Field(t, "parameters"); p != nullptr) function["parameters"] = *p;
      tools.push_back({{"type", "function"}, {"function", std::move(function)}});
    }
    if (!tools.empty()) (*chat)["tools"] = std::move(tools);
  }
  if (const ojson* c = Field(body, "tool_choice"); c != nullptr) {
    if (c->is_object()) {
      std::string type, name;
      RETURN_IF_API_ERROR(ReadString(*c, "type", "tool_choice.type", &type, true));
      RETURN_IF_API_ERROR(ReadString(*c, "name", "tool_choice.name", &name, true));
      if (type != "function") {
        return InvalidField("tool_choice.type", "tool_choice.type must be \"function\"");
      }
      (*chat)["tool_choice"] = {{"type", "function"}, {"function", {{"name", name}}}};
    } else {
      (*chat)["tool_choice"] = *c;  // "auto", "none", "required": checked as chat's
    }
  }
  if (const ojson* p = Field(body, "parallel_tool_calls"); p != nullptr) {
    (*chat)["parallel_tool_calls"] = *p;
  }
  return std::nullopt;
}

// text.format {type: text | json_object | json_schema (name, schema, strict)}
// and reasoning.effort.
std::optional<ApiError> ReadFormatAndReasoning(const ojson& body, ojson* chat) {
  if (const ojson* text = Field(body, "text"); text != nullptr) {
    if (!text->is_object()) return InvalidField("text", "text must be an object", "invalid_type");
    if (const ojson* f = Field(*text, "format"); f != nullptr) {
      std::string type;
      if (!f->is_object()) {
        return InvalidField("text.format", "text.format must be an object", "invalid_type");
      }
      RETURN_IF_API_ERROR(ReadString(*f, "type", "text.format.type", &type, true));
      if (type == "json_schema") {
        const ojson* schema = Field(*f, "schema");
        if (schema == nullptr || !schema->is_object()) {
          return InvalidField("text.format.schema", "text.format.schema must be an object",
                              "invalid_type");
        }
        (*chat)["response_format"] = {
            {"type", "json_schema"},
            {"json_schema", {{"name", f->value("name", "output")}, {"schema", *schema}}}};
      } else if (type == "json_object" || type == "text") {
        (*chat)["response_format"] = {{"type", type}};
      } else {
        return InvalidField("text.format.type",
                            "text.format.type must be text, json_object or json_schema");
      }
    }
  }
  if (const ojson* r = Field(body, "reasoning"); r != nullptr) {
    if (!r->is_object()) {
      return InvalidField("reasoning", "reasoning must be an object", "invalid_type");
    }
    std::string effort;
    RETURN_IF_API_ERROR(ReadString(*r, "effort", "reasoning.effort", &effort));
    if (effort == "none") {
      // The templates' own switch (GLM, Qwen3) turns reasoning off.
      (*chat)["chat_template_kwargs"] = {{"enable_thinking", false}};
    } else if (!effort.empty()) {
      (*chat)["reasoning_effort"] = effort;
    }
  }
  return std::nullopt;
}

// Fields whose meaning this server cannot honour: refused, not ignored.
std::optional<ApiError> RefuseStatefulFields(const ojson& body) {
  if (const ojson* s = Field(body, "store"); s != nullptr) {
    if (!s->is_boolean()) return InvalidField("store", "store must be a boolean", "invalid_type");
    if (s->get<bool>()) {
      return InvalidField("store",
                          "this server keeps no responses: send store: false (or leave it out) "
                          "and the whole conversation in input",
                          "unsupported_parameter");
    }
  }
  for (const char* name : {"previous_response_id", "conversation", "prompt"}) {
    if (Field(body, name) != nullptr) {
      return InvalidField(name,
                          std::string(name) +
                              " is not supported: this server keeps no responses; send the "
                              "whole conversation in input",
                          "unsupported_parameter");
    }
  }
  if (const ojson* b = Field(body, "background"); b != nullptr && !(b->is_boolean() && !*b)) {
    return InvalidField("background", "background responses are not supported",
                        "unsupported_parameter");
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> TranslateResponsesRequest(const ojson& body, bool input_only, ojson* chat,
                                                  const ResponsesLimits& limits) {
  if (!body.is_object()) return InvalidField("", "the request body must be a JSON object");
  *chat = ojson::object();
  if (const ojson* m = Field(body, "model"); m != nullptr && !m->is_string()) {
    return InvalidField("model", "model must be a string", "invalid_type");
  }
  RETURN_IF_API_ERROR(RefuseStatefulFields(body));
  RETURN_IF_API_ERROR(ReadInput(body, limits, chat));
  RETURN_IF_API_ERROR(ReadTools(body, limits, chat));
  RETURN_IF_API_ERROR(ReadFormatAndReasoning(body, chat));
  if (input_only) return std::nullopt;
  if (const ojson* m = Field(body, "max_output_tokens"); m != nullptr) (*chat)["max_tokens"] = *m;
  for (const char* name : {"temperature", "top_p", "stream"}) {
    if (const ojson* f = Field(body, name); f != nullptr) (*chat)[name] = *f;
  }
  if (const ojson* m = Field(body, "metadata"); m != nullptr && !m->is_object()) {
    return InvalidField("metadata", "metadata must be an object", "invalid_type");
  }
  return std::nullopt;
}

}  // namespace anymoe
