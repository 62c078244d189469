#include "server/completion_endpoint.h"

#include <malloc.h>

#include <ctime>
#include <deque>
#include <random>
#include <thread>

#include "formats/parse_util.h"
#include "runtime/engine.h"
#include "runtime/logit_guard.h"
#include "server/api_error.h"
#include "server/completion_service.h"
#include "server/event_channel.h"
#include "server/openai_format.h"
#include "server/request_params.h"
#include "server/sse.h"

namespace anymoe {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr auto kPollInterval = std::chrono::milliseconds(50);
// Non-streamed requests that finish within this time get a plain response with
// an exact status; longer ones switch to a chunked body so a disconnect is seen.
constexpr auto kNonStreamCommitDelay = std::chrono::milliseconds(500);
constexpr auto kPingInterval = std::chrono::seconds(10);
// After the client half-closed: how often a probe write checks it still reads.
constexpr auto kProbeInterval = std::chrono::milliseconds(250);

void SendError(ResponseStream& out, const ApiError& e) {
  HttpResponse r;
  r.status = e.status;
  r.content_type = "application/json";
  r.body = ApiErrorJson(e);
  if (e.status == 503) r.SetHeader("Retry-After", "1");
  out.Send(std::move(r));
}

std::string RandomId(const char* prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(rng()));
  return std::string(prefix) + buf;
}

// Scheduler::Submit errors are typed (core/status.h); the prompt of a chat
// request is its `messages`.
ApiError SubmitError(const Status& status, bool chat) {
  ApiError e = ApiErrorFromStatus(status);
  if (chat && e.param == "prompt") e.param = "messages";
  return e;
}

// One request from submission to the last byte of its response; shared by the
// handler, the content provider and its releaser (which may run after the
// handler returned).
struct Generation {
  Generation(const Tokenizer& tokenizer, std::string id, std::string model, bool chat,
             bool logprobs, bool usage_in_stream, RequestTracker& unwritten)
      : formatter(tokenizer, std::move(id), int64_t(std::time(nullptr)), std::move(model), chat,
                  logprobs, usage_in_stream),
        channel(std::make_shared<EventChannel>(&unwritten)) {}

  OpenAiFormatter formatter;
  CompletionRequest params;
  std::shared_ptr<EventChannel> channel;
  std::shared_ptr<RequestHandle> handle;
  Clock::time_point start = Clock::now();
  int64_t prompt_tokens = 0;

  std::string text;                  // all generated text
  std::vector<TokenLogprob> tokens;  // when logprobs
  int64_t generated = 0;
  std::optional<Clock::time_point> first_token_at, end_at;
  bool ended = false;
  StopReason reason = StopReason::kMaxTokens;
  std::string error;  // kError

  // Streaming: role chunk sent, logprob entries not yet sent, last write.
  bool role_sent = false;
  size_t tokens_sent = 0;
  Clock::time_point last_write = Clock::now();
  bool recorded = false;  // metrics taken
  bool client_gone = false;

  void Consume(const TimedEvent& te) {
    const RequestEvent& ev = te.event;
    switch (ev.kind) {
      case RequestEvent::Kind::kToken:
        if (!first_token_at) first_token_at = te.at;
        ++generated;
        if (params.logprobs) {
          TokenLogprob t{ev.token, ev.logprob, {}, text.size()};
          t.top.assign(ev.top_logprobs.begin(),
                       ev.top_logprobs.begin() +
                           std::min<size_t>(ev.top_logprobs.size(), size_t(params.top_logprobs)));
          tokens.push_back(std::move(t));
        }
        text += ev.text;
        break;
      case RequestEvent::Kind::kDone:
        text += ev.text;  // text held back until the end (a possible stop-string prefix)
        ended = true;
        end_at = te.at;
        reason = ev.reason;
        break;
      case RequestEvent::Kind::kError:
        ended = true;
        end_at = te.at;
        error = ev.error.empty() ? "generation failed" : ev.error;
        break;
    }
  }

  Usage usage() const { return {prompt_tokens, generated}; }
  // A cancel we did not ask for: the service is shutting down.
  bool cancelled_by_server() const {
    return ended && error.empty() && reason == StopReason::kCancelled && !client_gone;
  }
  std::string_view finish_label() const {
    if (!error.empty()) return "error";
    return FinishReason(reason);
  }
};

ApiError ShutdownError() { return Unavailable("the server is shutting down", "shutting_down"); }

ApiError GenerationError(const Generation& g) {
  if (g.cancelled_by_server()) return ShutdownError();
  ApiError e;
  e.status = 500;
  e.type = "server_error";
  e.message = g.error;
  if (g.error.starts_with(kNumericalErrorPrefix)) e.code = "numerical_error";
  return e;
}

void Record(Generation& g, ServerMetrics& metrics) {
  if (g.recorded) return;
  g.recorded = true;
  RequestRecord r;
  r.prompt_tokens = g.prompt_tokens;
  r.generated_tokens = g.generated;
  const Clock::time_point end = g.end_at.value_or(Clock::now());
  r.e2e_seconds = std::chrono::duration<double>(end - g.start).count();
  if (g.first_token_at) {
    r.ttft_seconds = std::chrono::duration<double>(*g.first_token_at - g.start).count();
  }
  r.finish_reason = g.client_gone && !g.ended ? "cancelled" : g.finish_label();
  metrics.RecordRequest(r);
}

// The SSE bytes for `te` (possibly none).
std::string StreamEvent(Generation& g, const TimedEvent& te) {
  g.Consume(te);
  std::string out;
  const RequestEvent& ev = te.event;
  if (ev.kind == RequestEvent::Kind::kToken) {
    if (ev.text.empty()) return out;  // its logprobs ride with the next piece of text
    const std::span<const TokenLogprob> pending(g.tokens.data() + g.tokens_sent,
                                                g.tokens.size() - g.tokens_sent);
    out = SseData(g.formatter.Chunk(ev.text, pending, std::nullopt));
    g.tokens_sent = g.tokens.size();
    return out;
  }
  if (!g.error.empty() || g.cancelled_by_server()) {
    out = SseData(ApiErrorValue(GenerationError(g)));
  } else {
    const std::span<const TokenLogprob> pending(g.tokens.data() + g.tokens_sent,
                                                g.tokens.size() - g.tokens_sent);
    out = SseData(g.formatter.Chunk(ev.text, pending, FinishReason(g.reason)));
    g.tokens_sent = g.tokens.size();
    if (g.params.include_usage) out += SseData(g.formatter.UsageChunk(g.usage()));
  }
  out += kSseDone;
  return out;
}

std::string ResponseBody(const Generation& g) {
  return DumpJson(g.formatter.Response(g.text, g.tokens, FinishReason(g.reason), g.usage()));
}

// Tokenizes the prompt or the rendered conversation.
std::optional<ApiError> PromptTokens(const Engine& engine, const CompletionRequest& p,
                                     std::vector<int32_t>* ids) {
  if (!p.chat) {
    *ids = p.prompt_is_ids ? p.prompt_ids : engine.Encode(p.prompt_text);
    return std::nullopt;
  }
  auto encoded = engine.EncodeChat(p.messages, /*add_generation_prompt=*/true);
  if (!encoded.ok()) {
    // The engine's message names the model path; keep it out of the response.
    return InvalidField("messages", "the model has no chat template; use /v1/completions",
                        "no_chat_template");
  }
  *ids = std::move(*encoded);
  return std::nullopt;
}

void ClientGone(Generation& g) {
  g.client_gone = true;
  g.handle->Cancel();
}

// Whether the client still reads, writing a probe when it half-closed: the
// first write to a peer that closed makes it answer with a reset, which the
// next check sees. Returns false when it is gone.
bool StillThere(Generation& g, ResponseStream& out, std::string_view probe,
                Clock::time_point* last_probe) {
  const ResponseStream::Peer peer = out.PeerState();
  if (peer == ResponseStream::Peer::kGone) return false;
  if (peer == ResponseStream::Peer::kHalfClosed) {
    const Clock::time_point now = Clock::now();
    if (now - *last_probe >= kProbeInterval) {
      *last_probe = now;
      if (!out.Write(probe)) return false;
      g.last_write = now;
    }
  }
  return true;
}

// An SSE stream: a chunk per piece of text, pings while silent, the end.
void Stream(Generation& g, ResponseStream& out) {
  HttpResponse head;
  head.content_type = "text/event-stream";
  head.SetHeader("Cache-Control", "no-cache");
  head.SetHeader("X-Accel-Buffering", "no");
  if (!out.Begin(std::move(head))) return ClientGone(g);
  Clock::time_point last_probe;
  std::deque<TimedEvent> events;
  for (;;) {
    events.clear();
    g.channel->Take(kPollInterval, &events);
    std::string text;
    if (g.params.chat && !g.role_sent) {
      text = SseData(g.formatter.RoleChunk());
      g.role_sent = true;
    }
    for (const TimedEvent& te : events) text += StreamEvent(g, te);
    if (!StillThere(g, out, kSsePing, &last_probe)) return ClientGone(g);
    const Clock::time_point now = Clock::now();
    if (text.empty() && now - g.last_write >= kPingInterval) text = kSsePing;
    if (!text.empty()) {
      if (!out.Write(text)) return ClientGone(g);
      g.last_write = now;
    }
    if (g.ended) {
      out.End();
      return;
    }
  }
}

// One JSON body: with its exact status when the request ends within
// kNonStreamCommitDelay; after that a 200 whose body follows when ready, so
// that the socket can be watched meanwhile (a late failure is then reported
// in the body).
void Answer(Generation& g, ResponseStream& out) {
  const Clock::time_point commit_at = Clock::now() + kNonStreamCommitDelay;
  std::deque<TimedEvent> events;
  while (!g.ended && Clock::now() < commit_at) {
    g.channel->Take(kPollInterval, &events);
    for (const TimedEvent& te : events) g.Consume(te);
    events.clear();
  }
  const auto body = [&g] {
    return !g.error.empty() || g.cancelled_by_server() ? ApiErrorJson(GenerationError(g))
                                                       : ResponseBody(g);
  };
  if (g.ended) {
    if (!g.error.empty() || g.cancelled_by_server()) return SendError(out, GenerationError(g));
    HttpResponse r;
    r.content_type = "application/json";
    r.body = body();
    out.Send(std::move(r));
    return;
  }
  HttpResponse head;
  head.content_type = "application/json";
  if (!out.Begin(std::move(head))) return ClientGone(g);
  Clock::time_point last_probe;
  for (;;) {
    g.channel->Take(kPollInterval, &events);
    for (const TimedEvent& te : events) g.Consume(te);
    events.clear();
    // JSON allows whitespace before a value: a space is a harmless probe.
    if (!StillThere(g, out, " ", &last_probe)) return ClientGone(g);
    if (g.ended) {
      if (!out.Write(body())) return ClientGone(g);
      out.End();
      return;
    }
  }
}

}  // namespace

std::optional<ApiError> CompletionEndpoint::Prepare(Engine& engine, bool chat,
                                                    std::string_view body_text,
                                                    CompletionRequest* params,
                                                    std::vector<int32_t>* prompt) {
  // A large body's JSON tree can take ~20x its bytes (a 1 MiB array of small
  // numbers: ~20 MB): such bodies are prepared a few at a time, and what they
  // used is given back to the system after (issue 20: every HTTP thread kept
  // 12-25 MB after one max-size request).
  const bool large = body_text.size() >= kLargeBody;
  if (large) large_bodies_.acquire();
  std::optional<ApiError> error;
  {
    JsonLimits limits;
    limits.max_depth = options_.json_max_depth;
    limits.quote_keys_in_errors = false;  // error messages never echo request text
    auto body = ParseJsonStrict(body_text, "request body", limits);
    if (!body.ok()) {
      error = InvalidField("", body.status().message(), "invalid_json");
    } else {
      RequestLimits request_limits;
      request_limits.vocab_size =
          std::min<int64_t>(engine.tokenizer().vocab_size(), engine.model().config().vocab_size);
      error = ParseCompletionRequest(*body, chat, request_limits, params);
      if (!error) error = PromptTokens(engine, *params, prompt);
    }
  }
  if (large) {
#ifdef __GLIBC__
    malloc_trim(0);
#endif
    large_bodies_.release();
  }
  return error;
}

void CompletionEndpoint::Handle(const ServingModel& model, bool chat, const HttpRequest& req,
                                ResponseStream& out) {
  Engine& engine = *model.engine;
  CompletionRequest params;
  std::vector<int32_t> prompt;
  if (auto e = Prepare(engine, chat, req.body, &params, &prompt)) return SendError(out, *e);
  const int64_t n_prompt = int64_t(prompt.size());
  if (n_prompt == 0) {
    return SendError(out, InvalidField(chat ? "messages" : "prompt", "empty prompt"));
  }
  if (n_prompt >= model.context) {
    return SendError(
        out, InvalidField(chat ? "messages" : "prompt",
                          "the prompt has " + std::to_string(n_prompt) +
                              " tokens but the context holds " + std::to_string(model.context) +
                              " (prompt plus generated tokens)",
                          "context_length_exceeded"));
  }
  // OpenAI defaults: 16 tokens for completions, the rest of the context for chat.
  // A budget past the context is cut to fit and ends with finish_reason "length".
  const int64_t room = model.context - n_prompt;
  const int64_t budget = std::min(params.max_tokens.value_or(chat ? room : 16), room);

  auto g = std::make_shared<Generation>(engine.tokenizer(), RandomId(chat ? "chatcmpl-" : "cmpl-"),
                                        options_.model_name, chat, params.logprobs,
                                        params.stream && params.include_usage, unwritten_);
  g->prompt_tokens = n_prompt;

  Request request;
  request.prompt = std::move(prompt);
  request.options.max_new_tokens = budget;
  request.options.sampling = params.sampling;
  request.options.sampling.seed = params.seed ? *params.seed : std::random_device{}();
  if (!params.ignore_eos) request.options.stop_tokens = engine.StopTokens();
  request.options.stop_strings = params.stop;
  request.logprobs = params.logprobs;
  request.top_logprobs = params.logprobs ? params.top_logprobs : 0;
  g->params = std::move(params);
  request.on_event = [channel = g->channel,
                      delay = options_.debug_token_delay](const RequestEvent& ev) {
    channel->Push(ev);
    if (delay.count() > 0 && ev.kind == RequestEvent::Kind::kToken) {
      std::this_thread::sleep_for(delay);
    }
  };

  auto handle = model.service->Submit(std::move(request));
  if (!handle.ok()) return SendError(out, SubmitError(handle.status(), chat));
  g->handle = *handle;
  tracker_.Enter();
  if (g->params.stream) {
    Stream(*g, out);
  } else {
    Answer(*g, out);
  }
  // The response is over, written or not: a request whose client went away
  // is cancelled here at the latest.
  g->channel->Close();
  if (!g->ended) {
    g->client_gone = true;
    g->handle->Cancel();
  }
  Record(*g, metrics_);
  tracker_.Leave();
}

}  // namespace anymoe
