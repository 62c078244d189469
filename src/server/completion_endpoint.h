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

#include "server/api_error.h"
#include "server/chat_prompt.h"
#include "server/http_message.h"
#include "server/metrics.h"
#include "server/request_params.h"
#include "server/request_tracker.h"
#include "server/response_stream.h"
#include "server/server_options.h"

namespace anymoe {

class Engine;

class CompletionEndpoint {
 public:
  // All four must outlive every response this endpoint starts. `tracker`
  // counts the responses in flight, `unwritten` those with events handed over
  // by the scheduler and not yet written.
  CompletionEndpoint(const ServerOptions& options, ServerMetrics& metrics, RequestTracker& tracker,
                     RequestTracker& unwritten)
      : options_(options), metrics_(metrics), tracker_(tracker), unwritten_(unwritten) {}

  void Handle(const ServingModel& model, bool chat, const HttpRequest& req, ResponseStream& out);

 private:
  // Bodies from this size on are parsed at most kLargeBodiesAtOnce at a time.
  static constexpr size_t kLargeBody = 256 << 10;
  static constexpr int kLargeBodiesAtOnce = 2;

  // Parses and validates the body and tokenizes the prompt.
  // Parses and validates the body, renders and tokenizes the prompt, compiles
  // a constraint (chat_prompt.h).
  std::optional<ApiError> Prepare(Engine& engine, bool chat, std::string_view body,
                                  CompletionRequest* params, ChatPlan* plan);

  const ServerOptions& options_;
  ServerMetrics& metrics_;
  RequestTracker& tracker_;
  RequestTracker& unwritten_;
  std::counting_semaphore<> large_bodies_{kLargeBodiesAtOnce};
  VocabularyCache vocabularies_;
};

}  // namespace anymoe
