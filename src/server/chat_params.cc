#include "server/chat_params.h"

#include "chat/tool_calls.h"
#include "server/json_fields.h"

namespace anymoe {
namespace {

using ojson = nlohmann::ordered_json;

// content: a string, text parts (joined), or null / absent, which becomes ""
// as in vLLM: OpenAI clients send null beside tool_calls, and templates that
// concatenate message['content'] would fail on a missing key.
std::optional<ApiError> ReadContent(const ojson& message, const std::string& name, ojson* out) {
  const ojson* v = Field(message, "content");
  if (v == nullptr) {
    *out = "";
    return std::nullopt;
  }
  if (v->is_string()) {
    *out = *v;
    return std::nullopt;
  }
  if (!v->is_array()) return InvalidField(name, name + " must be a string or an array of parts");
  std::string text;
  for (const ojson& part : *v) {
    auto type = part.is_object() ? part.find("type") : part.end();
    auto t = part.is_object() ? part.find("text") : part.end();
    if (type == part.end() || !type->is_string() || type->get<std::string>() != "text" ||
        t == part.end() || !t->is_string()) {
      return InvalidField(name,
                          name + ": only {\"type\": \"text\", \"text\": ...} parts are supported");
    }
    text += t->get<std::string>();
  }
  *out = std::move(text);
  return std::nullopt;
}

// An assistant message's tool_calls, with arguments as objects.
std::optional<ApiError> ReadToolCalls(const ojson& calls, const std::string& name, ojson* out) {
  if (!calls.is_array()) return InvalidField(name, name + " must be an array", "invalid_type");
  *out = ojson::array();
  for (size_t j = 0; j < calls.size(); ++j) {
    const ojson& c = calls[j];
    const std::string cn = name + "[" + std::to_string(j) + "]";
    if (!c.is_object()) return InvalidField(cn, cn + " must be an object", "invalid_type");
    std::string type = "function", id, fname;
    RETURN_IF_API_ERROR(ReadString(c, "type", cn + ".type", &type));
    if (type != "function") return InvalidField(cn + ".type", cn + ".type must be \"function\"");
    RETURN_IF_API_ERROR(ReadString(c, "id", cn + ".id", &id));
    const ojson* f = Field(c, "function");
    if (f == nullptr || !f->is_object()) {
      return InvalidField(cn + ".function", cn + ".function must be an object", "invalid_type");
    }
    RETURN_IF_API_ERROR(ReadString(*f, "name", cn + ".function.name", &fname, /*required=*/true));
    ojson args = ojson::object();
    if (const ojson* a = Field(*f, "arguments"); a != nullptr) {
      args = a->is_string() ? ParseJsonLimited(a->get<std::string>(), 32) : *a;
      if (!args.is_object()) {
        return InvalidField(cn + ".function.arguments",
                            cn + ".function.arguments must be a JSON object or its text");
      }
    }
    ojson call = ojson::object();
    if (!id.empty()) call["id"] = id;
    call["type"] = "function";
    call["function"] = {{"name", fname}, {"arguments", std::move(args)}};
    out->push_back(std::move(call));
  }
  return std::nullopt;
}

std::optional<ApiError> ReadMessages(const ojson& body, const ChatParamLimits& limits,
                                     ChatParams* out) {
  const ojson* v = nullptr;
  RETURN_IF_API_ERROR(ReadArray(body, "messages", limits.max_messages, /*required=*/true, &v));
  out->messages = ojson::array();
  for (size_t i = 0; i < v->size(); ++i) {
    const ojson& m = (*v)[i];
    const std::string name = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return InvalidField(name, name + " must be an object", "invalid_type");
    std::string role;
    RETURN_IF_API_ERROR(ReadString(m, "role", name + ".role", &role, /*required=*/true));
    if (role == "developer") role = "system";
    if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
      return InvalidField(name + ".role",
                          name + ".role must be one of system, developer, user, assistant, tool");
    }
    ojson message = ojson::object();
    message["role"] = role;
    RETURN_IF_API_ERROR(ReadContent(m, name + ".content", &message["content"]));
    std::string text;
    RETURN_IF_API_ERROR(ReadString(m, "name", name + ".name", &text));
    if (!text.empty()) message["name"] = text;
    if (role == "assistant") {
      // reasoning_content is what we return; "reasoning" is vLLM's newer name.
      std::string reasoning;
      RETURN_IF_API_ERROR(ReadString(m, "reasoning", name + ".reasoning", &reasoning));
      RETURN_IF_API_ERROR(
          ReadString(m, "reasoning_content", name + ".reasoning_content", &reasoning));
      if (Field(m, "reasoning_content") != nullptr || Field(m, "reasoning") != nullptr) {
        message["reasoning_content"] = reasoning;
      }
      if (const ojson* calls = Field(m, "tool_calls"); calls != nullptr) {
        RETURN_IF_API_ERROR(ReadToolCalls(*calls, name + ".tool_calls", &message["tool_calls"]));
      }
    }
    if (role == "tool") {
      std::string id;
      RETURN_IF_API_ERROR(ReadString(m, "tool_call_id", name + ".tool_call_id", &id));
      if (!id.empty()) message["tool_call_id"] = id;
    }
    out->messages.push_back(std::move(message));
  }
  return std::nullopt;
}

std::optional<ApiError> ReadTools(const ojson& body, const ChatParamLimits& limits,
                                  ChatParams* out) {
  const ojson* v = nullptr;
  RETURN_IF_API_ERROR(ReadArray(body, "tools", limits.max_tools, /*required=*/false, &v));
  if (v == nullptr || v->empty()) return std::nullopt;
  for (size_t i = 0; i < v->size(); ++i) {
    const ojson& t = (*v)[i];
    const std::string name = "tools[" + std::to_string(i) + "]";
    if (!t.is_object()) return InvalidField(name, name + " must be an object", "invalid_type");
    std::string type;
    RETURN_IF_API_ERROR(ReadString(t, "type", name + ".type", &type, /*required=*/true));
    if (type != "function")
      return InvalidField(name + ".type", name + ".type must be \"function\"");
    const ojson* f = Field(t, "function");
    if (f == nullptr || !f->is_object()) {
      return InvalidField(name + ".function", name + ".function must be an object", "invalid_type");
    }
    std::string fname, description;
    RETURN_IF_API_ERROR(ReadString(*f, "name", name + ".function.name", &fname, true));
    if (fname.empty() || fname.size() > 64) {
      return InvalidField(name + ".function.name", name + ".function.name must be 1-64 bytes");
    }
    RETURN_IF_API_ERROR(
        ReadString(*f, "description", name + ".function.description", &description));
    if (const ojson* p = Field(*f, "parameters"); p != nullptr && !p->is_object()) {
      return InvalidField(name + ".function.parameters",
                          name + ".function.parameters must be a JSON schema object");
    }
  }
  out->tools = *v;
  return std::nullopt;
}

bool HasTool(const ojson& tools, const std::string& name) {
  if (!tools.is_array()) return false;
  for (const ojson& t : tools) {
    if (t["function"]["name"] == name) return true;
  }
  return false;
}

std::optional<ApiError> ReadToolChoice(const ojson& body, ChatParams* out) {
  if (const ojson* p = Field(body, "parallel_tool_calls"); p != nullptr) {
    if (!p->is_boolean()) {
      return InvalidField("parallel_tool_calls", "parallel_tool_calls must be a boolean",
                          "invalid_type");
    }
    out->parallel_tool_calls = p->get<bool>();
  }
  const ojson* v = Field(body, "tool_choice");
  if (v == nullptr) return std::nullopt;
  if (v->is_string()) {
    const std::string c = v->get<std::string>();
    if (c == "auto")
      out->tool_choice = ToolChoice::kAuto;
    else if (c == "none")
      out->tool_choice = ToolChoice::kNone;
    else if (c == "required")
      out->tool_choice = ToolChoice::kRequired;
    else {
      return InvalidField("tool_choice",
                          "tool_choice must be \"auto\", \"none\", \"required\" or "
                          "{\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
  } else if (v->is_object()) {
    const ojson* f = Field(*v, "function");
    if (f == nullptr || !f->is_object() || !f->contains("name") || !(*f)["name"].is_string()) {
      return InvalidField("tool_choice", "tool_choice.function.name must be a string",
                          "invalid_type");
    }
    out->tool_choice = ToolChoice::kFunction;
    out->tool_name = (*f)["name"].get<std::string>();
    if (!HasTool(out->tools, out->tool_name)) {
      return InvalidField("tool_choice", "tool_choice names a function that is not in tools",
                          "unknown_tool");
    }
  } else {
    return InvalidField("tool_choice", "tool_choice must be a string or an object");
  }
  if (out->tools.is_null() && out->tool_choice == ToolChoice::kRequired) {
    return InvalidField("tool_choice", "tool_choice \"required\" needs tools");
  }
  return std::nullopt;
}

std::optional<ApiError> ReadTemplateKwargs(const ojson& body, ChatParams* out) {
  if (const ojson* k = Field(body, "chat_template_kwargs"); k != nullptr) {
    if (!k->is_object()) {
      return InvalidField("chat_template_kwargs", "chat_template_kwargs must be an object",
                          "invalid_type");
    }
    out->template_kwargs = *k;
  }
  if (const ojson* r = Field(body, "reasoning_effort"); r != nullptr) {
    if (!r->is_string() || r->get<std::string>().empty() || r->get<std::string>().size() > 32) {
      return InvalidField("reasoning_effort", "reasoning_effort must be a string such as \"low\"");
    }
    if (!out->template_kwargs.contains("reasoning_effort")) {
      out->template_kwargs["reasoning_effort"] = *r;
    }
  }
  return std::nullopt;
}

std::optional<ApiError> ReadResponseFormat(const ojson& body, ChatParams* out) {
  const ojson* f = Field(body, "response_format");
  if (f == nullptr) {
    // llama-server's extension: the schema itself as a top-level field.
    const ojson* top = Field(body, "json_schema");
    if (top == nullptr || top->is_null()) return std::nullopt;
    if (!top->is_object()) {
      return InvalidField("json_schema", "json_schema must be an object", "invalid_type");
    }
    out->response_format = ResponseFormat::kJsonSchema;
    out->response_schema = *top;
    out->response_schema_param = "json_schema";
    return std::nullopt;
  }
  const ojson* type = f->is_object() ? Field(*f, "type") : nullptr;
  if (type == nullptr || !type->is_string()) {
    return InvalidField("response_format", "response_format.type must be a string", "invalid_type");
  }
  const std::string t = type->get<std::string>();
  if (t == "text") return std::nullopt;
  if (t == "json_object") {
    // llama-server's extension: a json_object with a schema is constrained by it.
    if (const ojson* schema = Field(*f, "schema")) {
      if (!schema->is_object()) {
        return InvalidField("response_format.schema", "response_format.schema must be an object",
                            "invalid_type");
      }
      out->response_format = ResponseFormat::kJsonSchema;
      out->response_schema = *schema;
      return std::nullopt;
    }
    out->response_format = ResponseFormat::kJsonObject;
    return std::nullopt;
  }
  if (t != "json_schema") {
    return InvalidField("response_format.type",
                        "response_format.type must be text, json_object or json_schema");
  }
  const ojson* js = Field(*f, "json_schema");
  if (js == nullptr || !js->is_object()) {
    return InvalidField("response_format.json_schema",
                        "response_format.json_schema must be an object", "invalid_type");
  }
  const ojson* schema = Field(*js, "schema");
  if (schema == nullptr) {
    out->response_format = ResponseFormat::kJsonObject;  // no schema: any object
    return std::nullopt;
  }
  if (!schema->is_object()) {
    return InvalidField("response_format.json_schema.schema",
                        "response_format.json_schema.schema must be an object", "invalid_type");
  }
  out->response_format = ResponseFormat::kJsonSchema;
  out->response_schema = *schema;
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> ParseChatParams(const ojson& body, const ChatParamLimits& limits,
                                        ChatParams* out) {
  RETURN_IF_API_ERROR(ReadMessages(body, limits, out));
  RETURN_IF_API_ERROR(ReadTools(body, limits, out));
  RETURN_IF_API_ERROR(ReadToolChoice(body, out));
  RETURN_IF_API_ERROR(ReadTemplateKwargs(body, out));
  RETURN_IF_API_ERROR(ReadResponseFormat(body, out));
  if (out->response_format != ResponseFormat::kText &&
      (out->tool_choice == ToolChoice::kRequired || out->tool_choice == ToolChoice::kFunction)) {
    return InvalidField("response_format",
                        "response_format json cannot be combined with a forced tool_choice");
  }
  return std::nullopt;
}

namespace {

// Local references of a tool's parameters ("#", "#/$defs/X",
// "#/definitions/X") renamed into the combined schema's $defs as
// `prefix` + "X" (`prefix` itself names the parameters' root).
void RenameRefs(ojson* s, const std::string& prefix) {
  if (s->is_array()) {
    for (ojson& x : *s) RenameRefs(&x, prefix);
    return;
  }
  if (!s->is_object()) return;
  for (auto it = s->begin(); it != s->end(); ++it) {
    const std::string& k = it.key();
    if (k == "enum" || k == "const" || k == "default" || k == "examples") continue;  // values, not schemas
    if (k == "$ref" && it.value().is_string()) {
      const std::string r = it.value().get<std::string>();
      if (r == "#") it.value() = "#/$defs/" + prefix;
      for (const char* table : {"#/$defs/", "#/definitions/"}) {
        const std::string t = table;
        if (r.compare(0, t.size(), t) == 0) it.value() = "#/$defs/" + prefix + r.substr(t.size());
      }
      continue;
    }
    RenameRefs(&it.value(), prefix);
  }
}

}  // namespace

ojson ForcedToolCallSchema(const ChatParams& params) {
  ojson defs = ojson::object();
  size_t index = 0;
  // A tool's parameters, with their $defs moved to the root of the combined
  // schema, where their references resolve.
  auto parameters = [&](const ojson& tool) {
    const ojson& f = tool["function"];
    ojson p = f.contains("parameters") && f["parameters"].is_object()
                  ? f["parameters"]
                  : ojson{{"type", "object"}, {"properties", ojson::object()}};
    const std::string prefix = "tool" + std::to_string(index++) + "_";
    RenameRefs(&p, prefix);
    for (const char* table : {"$defs", "definitions"}) {
      if (!p.contains(table)) continue;
      if (p[table].is_object()) {
        for (auto it = p[table].begin(); it != p[table].end(); ++it) defs[prefix + it.key()] = it.value();
      }
      p.erase(table);
    }
    defs[prefix] = p;
    return p;
  };
  if (params.tool_choice == ToolChoice::kFunction) {
    for (const ojson& t : params.tools) {
      if (t["function"]["name"] != params.tool_name) continue;
      ojson p = parameters(t);
      p["$defs"] = defs;
      return p;
    }
    return nullptr;
  }
  ojson any_of = ojson::array();
  for (const ojson& t : params.tools) {
    ojson call = ojson::object();
    call["type"] = "object";
    call["properties"] = {{"name", {{"const", t["function"]["name"]}}},
                          {"arguments", parameters(t)}};
    call["required"] = {"name", "arguments"};
    call["additionalProperties"] = false;
    any_of.push_back(std::move(call));
  }
  ojson schema = ojson::object();
  schema["type"] = "array";
  schema["items"] = any_of.size() == 1 ? any_of[0] : ojson{{"anyOf", any_of}};
  schema["minItems"] = 1;
  if (!params.parallel_tool_calls) schema["maxItems"] = 1;
  schema["$defs"] = defs;
  return schema;
}

}  // namespace anymoe
