#include "server/chat_prompt.h"

#include "chat/grammar_constraint.h"
#include "runtime/engine.h"

namespace anymoe {

Expected<std::shared_ptr<const VocabularyIndex>> VocabularyCache::Get(const Engine& engine) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = indexes_.find(&engine);
  if (it != indexes_.end()) return it->second;
  ASSIGN_OR_RETURN(std::shared_ptr<const VocabularyIndex> index,
                   VocabularyIndex::Build(engine.tokenizer()));
  indexes_.emplace(&engine, index);
  return index;
}

namespace {

using ojson = nlohmann::ordered_json;

bool NeedsModelTemplate(const ChatParams& p) {
  if (!p.tools.is_null() || !p.template_kwargs.empty()) return true;
  for (const ojson& m : p.messages) {
    if (m.contains("tool_calls") || m.contains("reasoning_content") || m["role"] == "tool") {
      return true;
    }
  }
  return false;
}

// The prompt's ids and text.
std::optional<ApiError> Render(const Engine& engine, const CompletionRequest& request,
                               std::vector<int32_t>* ids, std::string* text) {
  const ChatParams& p = request.chat_params;
  if (engine.model_chat_template() == nullptr) {
    // A built-in renderer (--chat-template NAME, or no usable Jinja template).
    if (NeedsModelTemplate(p)) {
      return InvalidField(p.tools.is_null() ? "messages" : "tools",
                          "tools, tool messages and chat_template_kwargs need the model's own "
                          "chat template (this server renders a built-in one)",
                          "no_model_chat_template");
    }
    auto encoded = engine.EncodeChat(request.messages, /*add_generation_prompt=*/true);
    if (!encoded.ok()) {
      // The engine's message names the model path; keep it out of the response.
      return InvalidField("messages", "the model has no chat template; use /v1/completions",
                          "no_chat_template");
    }
    *ids = std::move(*encoded);
    auto rendered = engine.RenderChat(request.messages, true);
    if (rendered.ok()) *text = std::move(*rendered);
    return std::nullopt;
  }
  ChatRenderRequest r;
  r.messages = p.messages;
  r.tools = p.tools;
  r.add_generation_prompt = true;
  r.kwargs = p.template_kwargs;
  // Constrained output starts at the first generated token: no reasoning block
  // before it unless the request asks for one.
  const bool constrained = p.constrained() || !request.grammar.empty();
  if (constrained && !r.kwargs.contains("enable_thinking")) r.kwargs["enable_thinking"] = false;
  auto chat = engine.RenderChatRequest(r);
  if (!chat.ok()) {
    // Template errors are the template's own text (raise_exception) or the
    // engine's one-line reason; neither holds the request's text.
    return InvalidField("messages", chat.status().message(), "chat_template_error");
  }
  *ids = engine.tokenizer().EncodeWithPlainRanges(chat->text, /*add_bos=*/false,
                                                  chat->message_ranges);
  *text = std::move(chat->text);
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> PlanChat(const Engine& engine, VocabularyCache& vocabularies,
                                 const CompletionRequest& request, ChatPlan* plan) {
  const ChatParams& p = request.chat_params;
  if (auto e = Render(engine, request, &plan->prompt, &plan->prompt_text)) return e;
  const std::string& text = plan->prompt_text;

  ChatOutput::Options& o = plan->output;
  o.tools = p.tools;
  o.dialect = engine.tool_call_dialect();
  switch (p.tool_choice) {
    case ToolChoice::kFunction: o.mode = ChatOutput::Mode::kToolFunction; break;
    case ToolChoice::kRequired: o.mode = ChatOutput::Mode::kToolRequired; break;
    case ToolChoice::kAuto:
      o.mode = p.parse_tool_calls() ? ChatOutput::Mode::kToolsAuto : ChatOutput::Mode::kText;
      break;
    case ToolChoice::kNone: o.mode = ChatOutput::Mode::kText; break;
  }
  o.function = p.tool_name;
  if (!request.grammar.empty()) {
    // The output is the grammar's sentence, as generated: no tool-call
    // parsing, no reasoning split.
    o.mode = ChatOutput::Mode::kText;
    return CompileGrammarConstraint(engine, vocabularies, request.grammar, plan);
  }
  if (!p.constrained()) {
    const ModelChatTemplate* t = engine.model_chat_template();
    o.starts_in_reasoning = PromptOpensReasoning(text);
    o.split_reasoning = o.starts_in_reasoning ||
                        (t != nullptr && t->source().find("<think>") != std::string::npos);
    return std::nullopt;
  }

  // Constrained decoding: the schema, then the automaton over the vocabulary.
  ojson schema;
  std::string param;
  if (p.tool_choice == ToolChoice::kFunction || p.tool_choice == ToolChoice::kRequired) {
    schema = ForcedToolCallSchema(p);
    param = "tools";
  } else {
    schema = p.response_format == ResponseFormat::kJsonSchema ? p.response_schema : ojson(nullptr);
    param = p.response_schema_param;
  }
  return CompileJsonConstraint(engine, vocabularies, schema, param, plan);
}

std::optional<ApiError> CompileJsonConstraint(const Engine& engine, VocabularyCache& vocabularies,
                                              const nlohmann::ordered_json& schema,
                                              const std::string& param, ChatPlan* plan) {
  auto vocab = vocabularies.Get(engine);
  if (!vocab.ok()) {
    return InvalidField(param,
                        "constrained decoding is unavailable for this model's vocabulary: " +
                            vocab.status().message(),
                        "constrained_decoding_unavailable");
  }
  auto constraint = JsonConstraint::Create(schema, *vocab, engine.StopTokens());
  if (!constraint.ok()) {
    return InvalidField(param, constraint.status().message(), "unsupported_schema");
  }
  plan->constraint = std::move(*constraint);
  return std::nullopt;
}

std::optional<ApiError> CompileGrammarConstraint(const Engine& engine, VocabularyCache& vocabularies,
                                                 const std::string& grammar, ChatPlan* plan) {
  auto vocab = vocabularies.Get(engine);
  if (!vocab.ok()) {
    return InvalidField("grammar",
                        "constrained decoding is unavailable for this model's vocabulary: " +
                            vocab.status().message(),
                        "constrained_decoding_unavailable");
  }
  auto constraint = GrammarConstraint::Create(grammar, *vocab, engine.StopTokens());
  if (!constraint.ok()) {
    // The parser's messages name positions and rules, never echo the text.
    return InvalidField("grammar", constraint.status().message(), constraint.status().code());
  }
  plan->constraint = std::move(*constraint);
  return std::nullopt;
}

}  // namespace anymoe
