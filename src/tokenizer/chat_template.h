// Built-in renderers for the chat templates of the models we run, reproducing what
// each model's own Jinja template (rendered by transformers) outputs for a plain
// conversation, without running a template engine on model-supplied code.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "core/status.h"

namespace anymoe {

enum class ChatTemplateKind {
  kChatML,  // SmolLM2-Instruct's ChatML: adds SmolLM's default system prompt
  kGlm,     // GLM-4.5 / GLM-4.6: [gMASK]<sop>, <|system|> <|user|> <|assistant|>, thinking on
  kLlama3,  // Meta-Llama-3-Instruct: <|begin_of_text|> + header/eot turns
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" (GLM also renders "tool")
  std::string content;
};

std::string_view ChatTemplateName(ChatTemplateKind kind);  // "chatml", "glm", "llama3"

// "chatml" | "glm" | "llama3"; anything else is an error listing those names.
Expected<ChatTemplateKind> ChatTemplateFromName(std::string_view name);

// Picks the renderer for a model's Jinja source by its markers: <|im_start|> ->
// ChatML, <|start_header_id|> -> Llama-3, [gMASK] -> GLM; none -> error.
Expected<ChatTemplateKind> DetectChatTemplate(std::string_view jinja_source);

// The prompt text, special tokens written out (encode it with parse_special and
// without add_bos: the Llama-3 output already starts with <|begin_of_text|>).
std::string RenderChat(ChatTemplateKind kind, std::span<const ChatMessage> messages,
                       bool add_generation_prompt);

}  // namespace anymoe
