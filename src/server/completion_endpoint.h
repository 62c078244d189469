// POST /v1/completions and /v1/chat/completions: parse and validate the body,
// tokenize (chat: the model's template via Engine::RenderChat), check the
// context, submit to the CompletionService, and answer as one JSON body or as
// an SSE stream. A client that goes away is noticed between events (its socket
// reads EOF or a write fails) and its request is cancelled, freeing the slot.
#pragma once

#include "server/metrics.h"
#include "server/request_tracker.h"
#include "server/server_options.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace anymoe {

class CompletionEndpoint {
 public:
  // All four must outlive every response this endpoint starts. `tracker`
  // counts the responses in flight, `unwritten` those with events handed over
  // by the scheduler and not yet written.
  CompletionEndpoint(const ServerOptions& options, ServerMetrics& metrics, RequestTracker& tracker,
                     RequestTracker& unwritten)
      : options_(options), metrics_(metrics), tracker_(tracker), unwritten_(unwritten) {}

  void Handle(const ServingModel& model, bool chat, const httplib::Request& req,
              httplib::Response& res);

 private:
  const ServerOptions& options_;
  ServerMetrics& metrics_;
  RequestTracker& tracker_;
  RequestTracker& unwritten_;
};

}  // namespace anymoe
