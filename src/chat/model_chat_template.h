// The model's own chat template (the Jinja source from GGUF
// `tokenizer.chat_template`, tokenizer_config.json or chat_template.jinja),
// rendered as transformers' apply_chat_template renders it: messages with
// None-valued keys dropped and reasoning fields aliased, `tools`,
// `add_generation_prompt`, bos/eos token strings and extra keyword arguments
// (enable_thinking, reasoning_effort, ...) as template variables.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <span>
#include <string_view>

#include "chat/jinja/template.h"
#include "core/status.h"
#include "tokenizer/chat_template.h"

namespace anymoe {

// What a chat request hands the template (OpenAI-style JSON).
struct ChatRenderRequest {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();  // [{role, content, tool_calls, ...}]
  nlohmann::ordered_json tools;                                // null or [{type, function}]
  bool add_generation_prompt = true;
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();   // chat_template_kwargs
};

class ModelChatTemplate {
 public:
  // Parses `source`; bos/eos are the token strings transformers passes
  // (empty: not passed, as for a model without such a token).
  static Expected<ModelChatTemplate> Parse(std::string_view source, std::string bos_token,
                                           std::string eos_token);

  // Renders; the message texts, tools and kwargs are caller data, so their
  // bytes are listed in RenderedChat::message_ranges (never special tokens).
  Expected<RenderedChat> Render(const ChatRenderRequest& request,
                                const jinja::RenderOptions& options = {}) const;

  const std::string& source() const { return template_.source(); }

 private:
  jinja::Template template_;
  std::string bos_, eos_;
};

// A JSON value as a template value; strings are caller data when `input`.
// Fails beyond 64 levels of nesting.
Expected<jinja::Value> JsonToTemplateValue(const nlohmann::ordered_json& j, bool input);

// The messages of a plain conversation as JSON.
nlohmann::ordered_json ChatMessagesToJson(std::span<const ChatMessage> messages);

// The template a model folder or GGUF file ships: `<folder>/chat_template.jinja`
// when it exists (it takes precedence in transformers), else `tokenizer_template`
// (tokenizer_config.json / GGUF metadata). Empty when there is none.
Expected<std::string> ModelChatTemplateSource(const std::string& model_path, bool is_folder,
                                              const std::string& tokenizer_template);

}  // namespace anymoe
