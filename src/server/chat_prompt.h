// From a checked chat request to what the scheduler runs and how its output
// is read: the prompt rendered by the model's own template (tools, tool
// results, reasoning fed back, chat_template_kwargs), the JSON constraint for
// response_format and forced tool calls, and the ChatOutput settings
// (reasoning split, tool-call dialect).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "chat/json_constraint.h"
#include "chat/output_constraint.h"
#include "server/api_error.h"
#include "server/chat_output.h"
#include "server/request_params.h"

namespace anymoe {

class Engine;

// The vocabulary trie of each model, built on first use (tens of ms).
class VocabularyCache {
 public:
  Expected<std::shared_ptr<const VocabularyIndex>> Get(const Engine& engine);

 private:
  std::mutex mu_;
  std::map<const Engine*, std::shared_ptr<const VocabularyIndex>> indexes_;
};

struct ChatPlan {
  std::vector<int32_t> prompt;
  std::string prompt_text;  // the rendered template (POST /apply-template)
  std::shared_ptr<const OutputConstraint> constraint;  // null: free generation
  ChatOutput::Options output;                        // id_prefix left to each choice
};

std::optional<ApiError> PlanChat(const Engine& engine, VocabularyCache& vocabularies,
                                 const CompletionRequest& request, ChatPlan* plan);

// plan->constraint for `schema` (null: any JSON object) over the model's
// vocabulary; errors name `param`.
std::optional<ApiError> CompileJsonConstraint(const Engine& engine, VocabularyCache& vocabularies,
                                              const nlohmann::ordered_json& schema,
                                              const std::string& param, ChatPlan* plan);

// plan->constraint for a GBNF grammar (the request's `grammar`); a 400 with
// the grammar's error code (gbnf_grammar.h) when it does not compile.
std::optional<ApiError> CompileGrammarConstraint(const Engine& engine, VocabularyCache& vocabularies,
                                                 const std::string& grammar, ChatPlan* plan);

}  // namespace anymoe
