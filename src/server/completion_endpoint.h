// POST /v1/completions and /v1/chat/completions: parse and validate the body,
// tokenize (chat: the model's own template with tools, chat_prompt.h), check the
// context, submit n sequences to the CompletionService, and answer as one JSON
// body or as an SSE stream (chat: reasoning, content and tool calls apart). A client that goes away is noticed between events (its socket
// is reset or a write fails) and its request is cancelled, freeing the slot. A
// client that only half-closed (end of stream after its request) still gets
// its answer: from then on the stream is probed (an SSE comment, or a space
// before a JSON body) until a write shows whether anybody reads.
#pragma once

#include <optional>
#include <semaphore>
#include <string_view>
#include <vector>

#include "formats/parse_util.h"
#include "server/api_error.h"
#include "server/chat_encoder.h"
#include "server/chat_prompt.h"
#include "server/http_message.h"
#include "server/metrics.h"
#include "server/native_request.h"
#include "server/request_params.h"
#include <atomic>

#include "server/request_tracker.h"
#include "server/slot_table.h"
#include "server/response_stream.h"
#include "server/server_options.h"

namespace anymoe {

class Engine;

// The limits every request body is parsed under (--json-* server options).
JsonLimits RequestJsonLimits(const ServerOptions& options);
// Sends `e` as an error response in `api`'s shape.
void SendError(ResponseStream& out, const ApiError& e, ChatApi api = ChatApi::kOpenAi);

class CompletionEndpoint {
 public:
  // All four must outlive every response this endpoint starts. `tracker`
  // counts the responses in flight, `unwritten` those with events handed over
  // by the scheduler and not yet written.
  CompletionEndpoint(const ServerOptions& options, ServerMetrics& metrics, RequestTracker& tracker,
                     RequestTracker& unwritten)
      : options_(options), metrics_(metrics), tracker_(tracker), unwritten_(unwritten) {}

  void Handle(const ServingModel& model, bool chat, const HttpRequest& req, ResponseStream& out);
  // POST /v1/messages (kAnthropic) and /v1/responses (kResponses): the body
  // is translated into a chat request and served as one, in the API's shape.
  void HandleChatApi(const ServingModel& model, ChatApi api, const HttpRequest& req,
                     ResponseStream& out);
  // {"input_tokens": N}: the prompt the request would run, counted.
  void CountTokens(const ServingModel& model, ChatApi api, const HttpRequest& req,
                   ResponseStream& out);
  // llama-server's POST /completion (`infill` false) and POST /infill: its
  // request fields (native_request.h) and answer shapes (native_format.h).
  void HandleNative(const ServingModel& model, bool infill, const HttpRequest& req,
                    ResponseStream& out);
  // POST /apply-template (llama-server's): a chat completions body ->
  // {"prompt": the text the model's template renders for it}.
  void ApplyTemplate(const ServingModel& model, const HttpRequest& req, ResponseStream& out);
  // GET /slots (slot_table.h).
  const SlotTable& slots() const { return slots_; }

 private:
  // Bodies from this size on are parsed at most kLargeBodiesAtOnce at a time.
  static constexpr size_t kLargeBody = 256 << 10;
  static constexpr int kLargeBodiesAtOnce = 2;

  // `infill`: a kNative request came to /infill.
  void Run(const ServingModel& model, ChatApi api, bool chat, const HttpRequest& req,
           ResponseStream& out, bool infill = false);
  // Parses and validates the body (translated into a chat body first for
  // kAnthropic and kResponses), renders and tokenizes the prompt, compiles a
  // constraint (chat_prompt.h). `count_tokens`: the body of a count_tokens
  // request (no generation fields). `native`: a kNative request's own fields.
  std::optional<ApiError> Prepare(Engine& engine, ChatApi api, bool chat, bool count_tokens,
                                  std::string_view body, CompletionRequest* params,
                                  ChatPlan* plan, NativeRequest* native = nullptr);
  std::optional<ApiError> Translate(ChatApi api, bool count_tokens,
                                    const nlohmann::ordered_json& body,
                                    nlohmann::ordered_json* chat) const;

  const ServerOptions& options_;
  ServerMetrics& metrics_;
  RequestTracker& tracker_;
  RequestTracker& unwritten_;
  std::counting_semaphore<> large_bodies_{kLargeBodiesAtOnce};
  VocabularyCache vocabularies_;
  SlotTable slots_;
  std::atomic<int64_t> next_task_{0};
};

}  // namespace anymoe
