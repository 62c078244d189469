#include "server/anthropic_request.h"

#include <set>
#include <string>

#include "server/json_fields.h"

namespace anymoe {
namespace {

using ojson = nlohmann::ordered_json;

// The text of a string or an array of {"type": "text", "text"} blocks
// (system, tool_result content).
std::optional<ApiError> ReadText(const ojson& v, const std::string& name, std::string* out) {
  return ReadTextParts(v, name, {"text"}, out);
}

// The chat messages of one Anthropic message. `tool_ids`: the ids of the
// tool_use blocks seen so far, which tool_result blocks must name.
std::optional<ApiError> ReadMessage(const ojson& m, const std::string& name,
                                    const MessagesLimits& limits, std::set<std::string>* tool_ids,
                                    ojson* chat_messages) {
  if (!m.is_object()) return InvalidField(name, name + " must be an object", "invalid_type");
  std::string role;
  RETURN_IF_API_ERROR(ReadString(m, "role", name + ".role", &role, /*required=*/true));
  if (role != "user" && role != "assistant") {
    return InvalidField(name + ".role", name + ".role must be \"user\" or \"assistant\"");
  }
  const ojson* content = Field(m, "content");
  if (content == nullptr) return InvalidField(name + ".content", name + ".content is required");
  if (content->is_string()) {
    chat_messages->push_back({{"role", role}, {"content", *content}});
    return std::nullopt;
  }
  if (!content->is_array()) {
    return InvalidField(name + ".content", name + ".content must be a string or an array of blocks",
                        "invalid_type");
  }
  if (content->size() > limits.max_blocks) {
    return InvalidField(name + ".content",
                        "more than " + std::to_string(limits.max_blocks) + " content blocks");
  }
  std::string text, thinking;
  ojson calls = ojson::array();
  // A user message's text after tool results is a user message of its own.
  const auto flush_user_text = [&] {
    if (!text.empty()) chat_messages->push_back({{"role", "user"}, {"content", text}});
    text.clear();
  };
  for (size_t i = 0; i < content->size(); ++i) {
    const ojson& b = (*content)[i];
    const std::string bn = Indexed(name + ".content", i);
    if (!b.is_object()) return InvalidField(bn, bn + " must be an object", "invalid_type");
    std::string type;
    RETURN_IF_API_ERROR(ReadString(b, "type", bn + ".type", &type, /*required=*/true));
    if (type == "text") {
      std::string t;
      RETURN_IF_API_ERROR(ReadString(b, "text", bn + ".text", &t, /*required=*/true));
      text += t;
    } else if (role == "assistant" && type == "thinking") {
      std::string t;
      RETURN_IF_API_ERROR(ReadString(b, "thinking", bn + ".thinking", &t, /*required=*/true));
      thinking += t;
    } else if (role == "assistant" && type == "redacted_thinking") {
      // Opaque to this server: nothing to render.
    } else if (role == "assistant" && type == "tool_use") {
      std::string id, tool;
      RETURN_IF_API_ERROR(ReadString(b, "id", bn + ".id", &id, /*required=*/true));
      RETURN_IF_API_ERROR(ReadString(b, "name", bn + ".name", &tool, /*required=*/true));
      const ojson* input = Field(b, "input");
      if (input == nullptr || !input->is_object()) {
        return InvalidField(bn + ".input", bn + ".input must be an object", "invalid_type");
      }
      if (id.empty() || !tool_ids->insert(id).second) {
        return InvalidField(bn + ".id", bn + ".id must be non-empty and unique");
      }
      calls.push_back({{"id", id},
                       {"type", "function"},
                       {"function", {{"name", tool}, {"arguments", *input}}}});
    } else if (role == "user" && type == "tool_result") {
      std::string id, result;
      RETURN_IF_API_ERROR(ReadString(b, "tool_use_id", bn + ".tool_use_id", &id, true));
      if (tool_ids->count(id) == 0) {
        return InvalidField(bn + ".tool_use_id",
                            bn + ".tool_use_id names no tool_use block of an earlier message",
                            "unknown_tool_use_id");
      }
      if (const ojson* c = Field(b, "content"); c != nullptr) {
        RETURN_IF_API_ERROR(ReadText(*c, bn + ".content", &result));
      }
      bool is_error = false;
      if (const ojson* e = Field(b, "is_error"); e != nullptr) {
        if (!e->is_boolean()) {
          return InvalidField(bn + ".is_error", bn + ".is_error must be a boolean", "invalid_type");
        }
        is_error = e->get<bool>();
      }
      flush_user_text();
      chat_messages->push_back({{"role", "tool"},
                                {"tool_call_id", id},
                                {"content", is_error ? "Error: " + result : result}});
    } else {
      return InvalidField(bn + ".type", bn + ".type must be text, tool_result (user), or text, "
                                            "thinking, redacted_thinking, tool_use (assistant)");
    }
  }
  if (role == "user") {
    flush_user_text();
    return std::nullopt;
  }
  ojson message = {{"role", "assistant"}, {"content", text}};
  if (!thinking.empty()) message["reasoning_content"] = thinking;
  if (!calls.empty()) message["tool_calls"] = std::move(calls);
  chat_messages->push_back(std::move(message));
  return std::nullopt;
}

std::optional<ApiError> ReadMessages(const ojson& body, const MessagesLimits& limits,
                                     ojson* chat) {
  ojson messages = ojson::array();
  if (const ojson* s = Field(body, "system"); s != nullptr) {
    std::string system;
    RETURN_IF_API_ERROR(ReadText(*s, "system", &system));
    messages.push_back({{"role", "system"}, {"content", system}});
  }
  const ojson* v = nullptr;
  RETURN_IF_API_ERROR(ReadArray(body, "messages", limits.max_messages, /*required=*/true, &v));
  std::set<std::string> tool_ids;
  for (size_t i = 0; i < v->size(); ++i) {
    RETURN_IF_API_ERROR(ReadMessage((*v)[i], Indexed("messages", i), limits, &tool_ids, &messages));
  }
  if (v->back().is_object() && v->back().value("role", "") == "assistant") {
    // Anthropic continues a final assistant message (a prefill); the model's
    // template would close it and open a new turn instead.
    return InvalidField("messages", "the last message must have role \"user\" (prefilling the "
                                    "assistant's reply is not supported)");
  }
  (*chat)["messages"] = std::move(messages);
  return std::nullopt;
}

std::optional<ApiError> ReadTools(const ojson& body, const MessagesLimits& limits, ojson* chat) {
  const ojson* v = nullptr;
  RETURN_IF_API_ERROR(ReadArray(body, "tools", limits.max_tools, /*required=*/false, &v));
  if (v == nullptr) return std::nullopt;
  ojson tools = ojson::array();
  for (size_t i = 0; i < v->size(); ++i) {
    const ojson& t = (*v)[i];
    const std::string tn = Indexed("tools", i);
    if (!t.is_object()) return InvalidField(tn, tn + " must be an object", "invalid_type");
    std::string type = "custom", name, description;
    RETURN_IF_API_ERROR(ReadString(t, "type", tn + ".type", &type));
    if (type != "custom") {
      return InvalidField(tn + ".type", tn + ".type: only client tools (\"custom\") are supported");
    }
    RETURN_IF_API_ERROR(ReadString(t, "name", tn + ".name", &name, /*required=*/true));
    if (name.empty() || name.size() > 64) {
      return InvalidField(tn + ".name", tn + ".name must be 1-64 bytes");
    }
    RETURN_IF_API_ERROR(ReadString(t, "description", tn + ".description", &description));
    const ojson* schema = Field(t, "input_schema");
    if (schema == nullptr || !schema->is_object()) {
      return InvalidField(tn + ".input_schema", tn + ".input_schema must be a JSON schema object",
                          "invalid_type");
    }
    ojson function = {{"name", name}};
    if (!description.empty()) function["description"] = description;
    function["parameters"] = *schema;
    tools.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  if (!tools.empty()) (*chat)["tools"] = std::move(tools);
  return std::nullopt;
}

std::optional<ApiError> ReadToolChoice(const ojson& body, ojson* chat) {
  const ojson* v = Field(body, "tool_choice");
  if (v == nullptr) return std::nullopt;
  if (!v->is_object()) {
    return InvalidField("tool_choice", "tool_choice must be an object such as {\"type\": \"auto\"}",
                        "invalid_type");
  }
  std::string type, name;
  RETURN_IF_API_ERROR(ReadString(*v, "type", "tool_choice.type", &type, /*required=*/true));
  if (const ojson* p = Field(*v, "disable_parallel_tool_use"); p != nullptr) {
    if (!p->is_boolean()) {
      return InvalidField("tool_choice.disable_parallel_tool_use",
                          "tool_choice.disable_parallel_tool_use must be a boolean",
                          "invalid_type");
    }
    (*chat)["parallel_tool_calls"] = !p->get<bool>();
  }
  const bool has_tools = chat->contains("tools");
  if (type == "auto" || type == "none") {
    if (has_tools) (*chat)["tool_choice"] = type;
    return std::nullopt;
  }
  if (!has_tools) return InvalidField("tool_choice", "tool_choice " + type + " needs tools");
  if (type == "any") {
    (*chat)["tool_choice"] = "required";
    return std::nullopt;
  }
  if (type != "tool") {
    return InvalidField("tool_choice.type", "tool_choice.type must be auto, any, tool or none");
  }
  RETURN_IF_API_ERROR(ReadString(*v, "name", "tool_choice.name", &name, /*required=*/true));
  bool known = false;
  for (const ojson& t : (*chat)["tools"]) known |= t["function"]["name"] == name;
  if (!known) {
    return InvalidField("tool_choice.name", "tool_choice.name names no tool in tools",
                        "unknown_tool");
  }
  (*chat)["tool_choice"] = {{"type", "function"}, {"function", {{"name", name}}}};
  return std::nullopt;
}

// thinking {"type": "enabled", "budget_tokens"}, "adaptive", "between_tools"
// or "disabled": the template's enable_thinking (GLM, Qwen3, DeepSeek-V3.1
// templates read it). The budget is checked as Anthropic checks it but not
// enforced: the model ends its reasoning itself, within max_tokens.
std::optional<ApiError> ReadThinking(const ojson& body, ojson* chat) {
  const ojson* v = Field(body, "thinking");
  if (v == nullptr) return std::nullopt;
  if (!v->is_object()) return InvalidField("thinking", "thinking must be an object", "invalid_type");
  std::string type;
  RETURN_IF_API_ERROR(ReadString(*v, "type", "thinking.type", &type, /*required=*/true));
  if (type != "enabled" && type != "disabled" && type != "adaptive" && type != "between_tools") {
    return InvalidField("thinking.type",
                        "thinking.type must be enabled, adaptive, between_tools or disabled");
  }
  const bool enabled = type != "disabled";
  if (enabled) {
    const ojson* choice = Field(*chat, "tool_choice");
    if (choice != nullptr && !(choice->is_string() && (*choice == "auto" || *choice == "none"))) {
      return InvalidField("thinking",
                          "thinking cannot be combined with tool_choice any or tool (the call is "
                          "forced from its first token)");
    }
  }
  if (type == "enabled") {
    const ojson* budget = Field(*v, "budget_tokens");
    if (budget == nullptr || !budget->is_number_integer() || budget->get<int64_t>() < 1024) {
      return InvalidField("thinking.budget_tokens",
                          "thinking.budget_tokens must be an integer of at least 1024");
    }
    const ojson* max_tokens = Field(body, "max_tokens");
    if (max_tokens != nullptr && max_tokens->is_number_integer() &&
        budget->get<int64_t>() >= max_tokens->get<int64_t>()) {
      return InvalidField("thinking.budget_tokens",
                          "thinking.budget_tokens must be less than max_tokens");
    }
  }
  (*chat)["chat_template_kwargs"] = {{"enable_thinking", enabled}};
  return std::nullopt;
}

// output_config {effort, format {type: "json_schema", schema}}: the chat
// request's reasoning_effort and response_format json_schema.
std::optional<ApiError> ReadOutputConfig(const ojson& body, ojson* chat) {
  const ojson* v = Field(body, "output_config");
  if (v == nullptr) return std::nullopt;
  if (!v->is_object()) {
    return InvalidField("output_config", "output_config must be an object", "invalid_type");
  }
  std::string effort;
  RETURN_IF_API_ERROR(ReadString(*v, "effort", "output_config.effort", &effort));
  if (!effort.empty()) (*chat)["reasoning_effort"] = effort;
  if (const ojson* f = Field(*v, "format"); f != nullptr) {
    std::string type;
    if (!f->is_object()) {
      return InvalidField("output_config.format", "output_config.format must be an object",
                          "invalid_type");
    }
    RETURN_IF_API_ERROR(ReadString(*f, "type", "output_config.format.type", &type, true));
    const ojson* schema = Field(*f, "schema");
    if (type != "json_schema" || schema == nullptr || !schema->is_object()) {
      return InvalidField("output_config.format",
                          "output_config.format must be {\"type\": \"json_schema\", \"schema\": "
                          "{...}}");
    }
    (*chat)["response_format"] = {{"type", "json_schema"},
                                  {"json_schema", {{"name", "output"}, {"schema", *schema}}}};
  }
  return std::nullopt;
}

// The sampling fields, copied under their chat names after Anthropic's checks.
std::optional<ApiError> ReadSampling(const ojson& body, const MessagesLimits& limits,
                                     ojson* chat) {
  const ojson* max_tokens = Field(body, "max_tokens");
  if (max_tokens == nullptr) return InvalidField("max_tokens", "max_tokens is required");
  if (!max_tokens->is_number_integer() || max_tokens->get<int64_t>() < 1) {
    return InvalidField("max_tokens", "max_tokens must be a positive integer");
  }
  (*chat)["max_tokens"] = *max_tokens;
  if (const ojson* t = Field(body, "temperature"); t != nullptr) {
    if (!t->is_number() || t->get<double>() < 0 || t->get<double>() > 1) {
      return InvalidField("temperature", "temperature must be a number in [0, 1]");
    }
    (*chat)["temperature"] = *t;
  }
  for (const char* name : {"top_p", "top_k", "stream"}) {
    if (const ojson* f = Field(body, name); f != nullptr) (*chat)[name] = *f;
  }
  if (const ojson* s = Field(body, "stop_sequences"); s != nullptr) {
    if (!s->is_array()) {
      return InvalidField("stop_sequences", "stop_sequences must be an array of strings",
                          "invalid_type");
    }
    if (s->size() > limits.max_stop_sequences) {
      return InvalidField("stop_sequences", "at most " +
                                                std::to_string(limits.max_stop_sequences) +
                                                " stop_sequences");
    }
    if (!s->empty()) (*chat)["stop"] = *s;
  }
  if (const ojson* m = Field(body, "metadata"); m != nullptr) {
    std::string user;
    if (!m->is_object()) return InvalidField("metadata", "metadata must be an object", "invalid_type");
    RETURN_IF_API_ERROR(ReadString(*m, "user_id", "metadata.user_id", &user));
    if (user.size() > 256) return InvalidField("metadata.user_id", "metadata.user_id is too long");
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> TranslateMessagesRequest(const ojson& body, const MessagesLimits& limits,
                                                 bool count_tokens, ojson* chat) {
  if (!body.is_object()) return InvalidField("", "the request body must be a JSON object");
  *chat = ojson::object();
  if (const ojson* m = Field(body, "model"); m != nullptr && !m->is_string()) {
    return InvalidField("model", "model must be a string", "invalid_type");
  }
  RETURN_IF_API_ERROR(ReadMessages(body, limits, chat));
  RETURN_IF_API_ERROR(ReadTools(body, limits, chat));
  RETURN_IF_API_ERROR(ReadToolChoice(body, chat));
  RETURN_IF_API_ERROR(ReadThinking(body, chat));
  RETURN_IF_API_ERROR(ReadOutputConfig(body, chat));
  if (!count_tokens) RETURN_IF_API_ERROR(ReadSampling(body, limits, chat));
  return std::nullopt;
}

}  // namespace anymoe
