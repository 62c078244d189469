// Built-in renderers for the chat templates of the models we run, reproducing what
// each model's own Jinja template (rendered by transformers) outputs for a plain
// conversation, without running a template engine on model-supplied code.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/added_tokens.h"

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

// A rendered conversation and where the messages' own text (roles and
// contents) lies in it. Only the template's markup may hold special tokens:
// encode `text` with Tokenizer::EncodeWithPlainRanges(text, false, message_ranges)
// (no add_bos: the Llama-3 output already starts with <|begin_of_text|>).
struct RenderedChat {
  std::string text;
  std::vector<TextRange> message_ranges;  // sorted, disjoint, non-empty
};

RenderedChat RenderChatWithRanges(ChatTemplateKind kind, std::span<const ChatMessage> messages,
                                  bool add_generation_prompt);

// Just the text of RenderChatWithRanges: the prompt with special tokens written out.
std::string RenderChat(ChatTemplateKind kind, std::span<const ChatMessage> messages,
                       bool add_generation_prompt);

}  // namespace anymoe
