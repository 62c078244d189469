// Renders a model's Jinja chat template the way transformers 5.x does
// (tokenization_utils_base.apply_chat_template -> render_jinja_template).
#include "chat/model_chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace anymoe {
namespace {

using jinja::Value;
using Json = nlohmann::ordered_json;

Value Convert(const Json& j, bool input, int depth) {
  if (depth > 64) jinja::Fail("JSON nested deeper than 64 levels", "ValueError");
  switch (j.type()) {
    case Json::value_t::null:
    case Json::value_t::discarded: return Value::None();
    case Json::value_t::boolean: return Value::Bool(j.get<bool>());
    case Json::value_t::number_integer: return Value::Int(j.get<int64_t>());
    case Json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > uint64_t(INT64_MAX)) return Value::Float(double(u));
      return Value::Int(int64_t(u));
    }
    case Json::value_t::number_float: return Value::Float(j.get<double>());
    case Json::value_t::string:
      return input ? Value::InputStr(j.get<std::string>()) : Value::Str(j.get<std::string>());
    case Json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const Json& x : j) items.push_back(Convert(x, input, depth + 1));
      return Value::List(std::move(items));
    }
    case Json::value_t::object: {
      auto d = std::make_shared<jinja::DictData>();
      for (auto it = j.begin(); it != j.end(); ++it) {
        d->entries.emplace_back(input ? Value::InputStr(it.key()) : Value::Str(it.key()),
                                Convert(it.value(), input, depth + 1));
      }
      return Value::Dict(std::move(d));
    }
    case Json::value_t::binary: jinja::Fail("binary JSON values are not supported", "ValueError");
  }
  return Value::None();
}

// transformers: drop keys whose value is None, then
// {"thinking": r, **message, "reasoning_content": r} when a reasoning field is set.
Json NormalizeMessage(const Json& m) {
  Json out = Json::object();
  for (auto it = m.begin(); it != m.end(); ++it) {
    if (!it.value().is_null()) out[it.key()] = it.value();
  }
  const Json* reasoning = nullptr;
  for (const char* key : {"reasoning_content", "thinking", "reasoning"}) {
    if (out.contains(key)) {
      reasoning = &out[key];
      break;
    }
  }
  if (!reasoning) return out;
  const Json r = *reasoning;
  Json aliased = Json::object();
  aliased["thinking"] = r;
  for (auto it = out.begin(); it != out.end(); ++it) aliased[it.key()] = it.value();
  aliased["reasoning_content"] = r;
  return aliased;
}

}  // namespace

Expected<Value> JsonToTemplateValue(const Json& j, bool input) {
  try {
    return Convert(j, input, 0);
  } catch (const jinja::JinjaError& e) {
    return Status::Error(std::string("chat template input: ") + e.what());
  }
}

Json ChatMessagesToJson(std::span<const ChatMessage> messages) {
  Json out = Json::array();
  for (const ChatMessage& m : messages) out.push_back({{"role", m.role}, {"content", m.content}});
  return out;
}

Expected<ModelChatTemplate> ModelChatTemplate::Parse(std::string_view source, std::string bos_token,
                                                     std::string eos_token) {
  ModelChatTemplate t;
  ASSIGN_OR_RETURN(t.template_, jinja::Template::Parse(source));
  t.bos_ = std::move(bos_token);
  t.eos_ = std::move(eos_token);
  return t;
}

Expected<RenderedChat> ModelChatTemplate::Render(const ChatRenderRequest& request,
                                                 const jinja::RenderOptions& options) const {
  if (!request.messages.is_array()) return Status::Error("chat messages must be an array");
  if (request.messages.empty()) {
    return Status::Error("cannot apply a chat template to an empty conversation");
  }
  if (!request.kwargs.is_null() && !request.kwargs.is_object()) {
    return Status::Error("chat template kwargs must be an object");
  }
  Json messages = Json::array();
  for (const Json& m : request.messages) {
    if (!m.is_object()) return Status::Error("each chat message must be an object");
    messages.push_back(NormalizeMessage(m));
  }
  std::vector<std::pair<std::string, Value>> vars;
  // transformers: {**special_tokens_map, **kwargs}, then messages/tools/documents/add_generation_prompt.
  if (!bos_.empty()) vars.emplace_back("bos_token", Value::Str(bos_));
  if (!eos_.empty()) vars.emplace_back("eos_token", Value::Str(eos_));
  if (request.kwargs.is_object()) {
    for (auto it = request.kwargs.begin(); it != request.kwargs.end(); ++it) {
      ASSIGN_OR_RETURN(Value v, JsonToTemplateValue(it.value(), true));
      vars.emplace_back(it.key(), std::move(v));
    }
  }
  ASSIGN_OR_RETURN(Value msgs, JsonToTemplateValue(messages, true));
  vars.emplace_back("messages", std::move(msgs));
  if (request.tools.is_null()) {
    vars.emplace_back("tools", Value::None());
  } else {
    ASSIGN_OR_RETURN(Value tools, JsonToTemplateValue(request.tools, true));
    vars.emplace_back("tools", std::move(tools));
  }
  vars.emplace_back("documents", Value::None());
  vars.emplace_back("add_generation_prompt", Value::Bool(request.add_generation_prompt));
  ASSIGN_OR_RETURN(jinja::RenderedText r, template_.Render(vars, options));
  return RenderedChat{std::move(r.text), std::move(r.input_ranges)};
}

Expected<std::string> ModelChatTemplateSource(const std::string& model_path, bool is_folder,
                                              const std::string& tokenizer_template) {
  if (is_folder) {
    namespace fs = std::filesystem;
    const fs::path path = fs::path(model_path) / "chat_template.jinja";
    std::error_code ec;
    if (fs::is_regular_file(path, ec)) {
      const uintmax_t size = fs::file_size(path, ec);
      if (ec || size > (uintmax_t(1) << 20)) {
        return Status::Error(path.string() + ": larger than the 1 MiB a chat template may be");
      }
      std::ifstream in(path, std::ios::binary);
      std::ostringstream text;
      text << in.rdbuf();
      if (!in.good() && !in.eof()) return Status::Error(path.string() + ": cannot be read");
      return text.str();
    }
  }
  return tokenizer_template;
}

}  // namespace anymoe
