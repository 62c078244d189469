#include "server/completion_endpoint.h"

#include <malloc.h>

#include <ctime>
#include <deque>
#include <random>
#include <thread>

#include "formats/parse_util.h"
#include "runtime/engine.h"
#include "server/anthropic_format.h"
#include "server/anthropic_request.h"
#include "server/api_error.h"
#include "server/chat_output.h"
#include "server/completion_service.h"
#include "server/event_channel.h"
#include "server/native_format.h"
#include "server/openai_format.h"
#include "server/request_params.h"
#include "server/responses_format.h"
#include "server/responses_request.h"
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

}  // namespace

JsonLimits RequestJsonLimits(const ServerOptions& options) {
  JsonLimits limits;
  limits.max_depth = options.json_max_depth;
  limits.max_values = options.json_max_values;
  limits.max_containers = options.json_max_containers;
  limits.quote_keys_in_errors = false;  // error messages never echo request text
  return limits;
}

void SendError(ResponseStream& out, const ApiError& e, ChatApi api) {
  HttpResponse r;
  r.status = e.status;
  r.content_type = "application/json";
  r.body = DumpJson(ChatApiErrorValue(api, e));
  if (e.status == 503) r.SetHeader("Retry-After", "1");
  out.Send(std::move(r));
}

namespace {

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

// One of the request's n sequences.
struct Choice {
  std::shared_ptr<RequestHandle> handle;
  std::string text;                  // all generated text
  std::vector<TokenLogprob> tokens;  // when logprobs
  std::vector<int32_t> ids;          // every generated token (which stop string ended it)
  int64_t generated = 0;
  bool ended = false;
  StopReason reason = StopReason::kMaxTokens;
  std::string error;                 // kError
  std::string error_code;            // kError, machine-readable (may be empty)
  bool unavailable = false;          // kError of the engine, not the request (503)
  std::optional<ChatOutput> chat;    // chat: reasoning, content and tool calls
  size_t tokens_sent = 0;            // streaming: logprob entries sent
  bool echo_sent = false;            // streaming completions with echo
  int64_t cached_tokens = 0;         // prompt tokens from the prefix cache
  GenerateStats stats;               // kDone: prefill and decode times
  size_t ids_sent = 0;               // streaming kNative: token ids sent
};

// One request from submission to the last byte of its response; shared by the
// handler, the content provider and its releaser (which may run after the
// handler returned).
struct Generation {
  Generation(const Tokenizer& tokenizer, std::string id, std::string model, bool chat,
             bool logprobs, bool usage_in_stream, RequestTracker& unwritten, size_t n)
      : tokenizer(tokenizer),
        formatter(tokenizer, std::move(id), int64_t(std::time(nullptr)), std::move(model), chat,
                  logprobs, usage_in_stream),
        channel(std::make_shared<EventChannel>(&unwritten, n)),
        choices(n) {}

  const Tokenizer& tokenizer;
  OpenAiFormatter formatter;
  // Anthropic Messages / Responses (one choice): their wire format, the
  // events it made that are not yet written, and how the choice ended.
  ChatApi api = ChatApi::kOpenAi;
  std::unique_ptr<ChatEncoder> encoder;
  // llama-server's /completion and /infill (one choice): their wire format
  // and the prompt's text as tokenized (the body's "prompt").
  std::unique_ptr<NativeFormatter> native;
  std::string native_prompt;
  std::string encoded;
  ChatFinish ending;
  CompletionRequest params;
  std::shared_ptr<EventChannel> channel;
  std::vector<Choice> choices;
  std::string echo;  // completions with echo: the prompt's text
  Clock::time_point start = Clock::now();
  int64_t prompt_tokens = 0;
  std::optional<Clock::time_point> first_token_at, end_at;
  bool ended = false;  // every choice ended
  bool role_sent = false;
  Clock::time_point last_write = Clock::now();
  bool recorded = false;  // metrics taken
  bool client_gone = false;

  void Consume(const TimedEvent& te) {
    const RequestEvent& ev = te.event;
    Choice& c = choices[te.choice];
    switch (ev.kind) {
      case RequestEvent::Kind::kToken:
        if (!first_token_at) first_token_at = te.at;
        ++c.generated;
        c.ids.push_back(ev.token);
        if (params.logprobs) {
          TokenLogprob t{ev.token, ev.logprob, {}, echo.size() + c.text.size()};
          t.top.assign(ev.top_logprobs.begin(),
                       ev.top_logprobs.begin() +
                           std::min<size_t>(ev.top_logprobs.size(), size_t(params.top_logprobs)));
          c.tokens.push_back(std::move(t));
        }
        c.text += ev.text;
        break;
      case RequestEvent::Kind::kDone:
        c.text += ev.text;  // text held back until the end (a possible stop-string prefix)
        c.ended = true;
        c.reason = ev.reason;
        c.cached_tokens = ev.stats.reused_tokens;
        c.stats = ev.stats;
        break;
      case RequestEvent::Kind::kError:
        c.ended = true;
        c.error = ev.error.empty() ? "generation failed" : ev.error;
        c.error_code = ev.error_code;
        c.unavailable = ev.error_kind == ErrorKind::kUnavailable;
        break;
    }
    if (encoder && ev.kind != RequestEvent::Kind::kError) Encode(c, ev);
    if (c.ended) {
      ended = std::all_of(choices.begin(), choices.end(), [](const Choice& x) { return x.ended; });
      // One failed sequence fails the request: the others stop now.
      if (!c.error.empty()) {
        for (Choice& x : choices) x.handle->Cancel();
      }
      if (ended) end_at = te.at;
    }
  }

  // The chat output of `ev` (on kDone with what was held back).
  ChatDelta FeedChat(Choice& c, const RequestEvent& ev) {
    ChatDelta d = c.chat->Feed(ev.text);
    if (ev.kind == RequestEvent::Kind::kDone) {
      ChatDelta rest = c.chat->Finish();
      d.reasoning += rest.reasoning;
      d.content += rest.content;
      for (ToolCallDelta& t : rest.tool_calls) d.tool_calls.push_back(std::move(t));
    }
    return d;
  }

  // Every event goes through the encoder, streamed or not, so that the
  // whole body is the stream's accumulation.
  void Encode(Choice& c, const RequestEvent& ev) {
    encoded += encoder->Delta(FeedChat(c, ev));
    if (ev.kind != RequestEvent::Kind::kDone || ev.reason == StopReason::kCancelled) return;
    ending.reason = ev.reason;
    ending.usage = usage();
    if (ev.reason == StopReason::kStopString) ending.stop_sequence = MatchedStop(c);
    encoded += encoder->Close(ending);
  }

  // The stop string that ended `c`: the earliest in its generated tokens'
  // text (the emitted text stops before it; the first listed wins a tie).
  std::string MatchedStop(const Choice& c) const {
    if (params.stop.size() == 1) return params.stop[0];
    const std::string text = tokenizer.Decode(c.ids);
    size_t best = std::string::npos;
    std::string match;
    for (const std::string& s : params.stop) {
      const size_t at = text.find(s);
      if (at < best) best = at, match = s;
    }
    return match;
  }

  Usage usage() const {
    Usage u{prompt_tokens, 0};
    for (const Choice& c : choices) u.completion_tokens += c.generated;
    u.cached_tokens = choices[0].cached_tokens;
    return u;
  }
  const Choice* failed() const {
    for (const Choice& c : choices) {
      if (!c.error.empty()) return &c;
    }
    return nullptr;
  }
  // A cancel we did not ask for: the service is shutting down.
  bool cancelled_by_server() const {
    return ended && failed() == nullptr && !client_gone &&
           std::any_of(choices.begin(), choices.end(),
                       [](const Choice& c) { return c.reason == StopReason::kCancelled; });
  }
  bool failed_or_cancelled() const { return failed() != nullptr || cancelled_by_server(); }
  // finish_reason of a choice: tool_calls when it stopped with calls.
  std::string_view finish(const Choice& c) const {
    if (c.chat && !c.chat->calls().empty() && c.reason != StopReason::kMaxTokens &&
        c.reason != StopReason::kContextFull) {
      return "tool_calls";
    }
    return FinishReason(c.reason);
  }
  std::string_view finish_label() const {
    if (failed() != nullptr) return "error";
    return FinishReason(choices[0].reason);
  }
};

ApiError ShutdownError() { return Unavailable("the server is shutting down", "shutting_down"); }

ApiError GenerationError(const Generation& g) {
  if (g.cancelled_by_server()) return ShutdownError();
  const Choice* failed = g.failed();
  if (failed != nullptr && failed->unavailable) return Unavailable(failed->error, failed->error_code);
  ApiError e;
  e.status = 500;
  e.type = "server_error";
  e.message = failed != nullptr ? failed->error : "generation failed";
  if (failed != nullptr) e.code = failed->error_code;
  return e;
}

void Record(Generation& g, ServerMetrics& metrics) {
  if (g.recorded) return;
  g.recorded = true;
  RequestRecord r;
  r.prompt_tokens = g.prompt_tokens;
  r.generated_tokens = g.usage().completion_tokens;
  const Clock::time_point end = g.end_at.value_or(Clock::now());
  r.e2e_seconds = std::chrono::duration<double>(end - g.start).count();
  if (g.first_token_at) {
    r.ttft_seconds = std::chrono::duration<double>(*g.first_token_at - g.start).count();
  }
  r.finish_reason = g.client_gone && !g.ended ? "cancelled" : g.finish_label();
  metrics.RecordRequest(r);
}

NativeResult NativeResultOf(const Generation& g, const Choice& c) {
  NativeResult r;
  r.content = c.text;
  r.tokens = c.ids;
  r.probs = c.tokens;
  r.reason = c.reason;
  if (c.reason == StopReason::kStopString) r.stopping_word = g.MatchedStop(c);
  r.prompt = g.native_prompt;
  r.prompt_tokens = g.prompt_tokens;
  r.cached_tokens = c.cached_tokens;
  r.prompt_ms = 1e3 * c.stats.prompt_seconds;
  r.predicted_ms = 1e3 * c.stats.decode_seconds;
  return r;
}

// kNative: a data: line per piece of text with the ids it came from; the
// last one (stop: true) carries the held-back text and the whole body's fields.
std::string NativeStreamEvent(Generation& g, Choice& c, const RequestEvent& ev) {
  const std::span<const int32_t> ids(c.ids.data() + c.ids_sent, c.ids.size() - c.ids_sent);
  const std::span<const TokenLogprob> probs(c.tokens.data() + c.tokens_sent,
                                            c.tokens.size() - c.tokens_sent);
  if (ev.kind == RequestEvent::Kind::kDone) {
    if (c.reason == StopReason::kCancelled) return "";
    NativeResult r = NativeResultOf(g, c);
    std::string out;
    if (!ev.text.empty() || !ids.empty()) {
      out = SseData(g.native->Chunk(ev.text, ids, probs, c.generated, g.prompt_tokens));
    }
    r.content.clear();
    return out + SseData(g.native->Final(r, /*streamed=*/true));
  }
  if (ev.text.empty()) return "";  // its ids ride with the next piece of text
  c.ids_sent = c.ids.size();
  c.tokens_sent = c.tokens.size();
  return SseData(g.native->Chunk(ev.text, ids, probs, c.generated, g.prompt_tokens));
}

// The SSE bytes for `te` (possibly none).
std::string StreamEvent(Generation& g, const TimedEvent& te) {
  g.Consume(te);
  if (g.encoder) return std::exchange(g.encoded, std::string());
  const RequestEvent& ev = te.event;
  Choice& c = g.choices[te.choice];
  if (ev.kind == RequestEvent::Kind::kError) return "";  // the request's end reports it
  if (g.native) return NativeStreamEvent(g, c, ev);
  std::optional<std::string_view> finish;
  json payload;
  if (g.params.chat) {
    ChatDelta d = g.FeedChat(c, ev);
    if (ev.kind == RequestEvent::Kind::kDone) {
      if (g.cancelled_by_server() || c.reason == StopReason::kCancelled) return "";
      finish = g.finish(c);
    } else if (d.empty()) {
      return "";  // its logprobs ride with the next piece of text
    }
    payload = ChatDeltaJson(d);
  } else {
    std::string text = ev.text;
    if (!c.echo_sent) {
      text = g.echo + text;
      c.echo_sent = true;
    }
    if (ev.kind == RequestEvent::Kind::kDone) {
      if (c.reason == StopReason::kCancelled) return "";
      finish = FinishReason(c.reason);
    } else if (text.empty()) {
      return "";
    }
    payload = text;
  }
  const std::span<const TokenLogprob> pending(c.tokens.data() + c.tokens_sent,
                                              c.tokens.size() - c.tokens_sent);
  c.tokens_sent = c.tokens.size();
  return SseData(g.formatter.ChoiceChunk(te.choice, std::move(payload), pending, finish));
}

// The end of a stream, once every choice ended.
std::string StreamEnd(Generation& g) {
  if (g.encoder) return g.failed_or_cancelled() ? g.encoder->StreamError(GenerationError(g)) : "";
  // llama-server ends its native streams with the stop: true chunk, no [DONE].
  if (g.native) return g.failed_or_cancelled() ? SseData(ApiErrorValue(GenerationError(g))) : "";
  std::string out;
  if (g.failed_or_cancelled()) {
    out = SseData(ApiErrorValue(GenerationError(g)));
  } else if (g.params.include_usage) {
    out = SseData(g.formatter.UsageChunk(g.usage()));
  }
  return out + std::string(kSseDone);
}

std::string ResponseBody(Generation& g) {
  if (g.encoder) return DumpJson(g.encoder->Body(g.ending));
  if (g.native) return DumpJson(g.native->Final(NativeResultOf(g, g.choices[0]), false));
  json choices = json::array();
  for (size_t i = 0; i < g.choices.size(); ++i) {
    Choice& c = g.choices[i];
    json payload;
    if (g.params.chat) {
      c.chat->Feed(c.text);
      c.chat->Finish();
      payload = ChatMessageJson(*c.chat);
    } else {
      payload = g.echo + c.text;
    }
    choices.push_back(g.formatter.Choice(i, std::move(payload), c.tokens, g.finish(c)));
  }
  return DumpJson(g.formatter.Response(std::move(choices), g.usage()));
}

void CancelAll(Generation& g) {
  for (Choice& c : g.choices) {
    if (c.handle) c.handle->Cancel();
  }
}

void ClientGone(Generation& g) {
  g.client_gone = true;
  CancelAll(g);
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
    if (g.encoder && !g.role_sent) {
      text += g.encoder->Open(g.usage());
      g.role_sent = true;
    } else if (g.params.chat && !g.role_sent) {
      for (size_t i = 0; i < g.choices.size(); ++i) text += SseData(g.formatter.RoleChunk(i));
      g.role_sent = true;
    }
    for (const TimedEvent& te : events) text += StreamEvent(g, te);
    if (g.ended) text += StreamEnd(g);
    if (!StillThere(g, out, kSsePing, &last_probe)) return ClientGone(g);
    const Clock::time_point now = Clock::now();
    if (text.empty() && now - g.last_write >= kPingInterval) {
      text = g.encoder ? g.encoder->Ping() : kSsePing;
    }
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
    g.encoded.clear();  // the body is built whole
  }
  const auto body = [&g] {
    return g.failed_or_cancelled() ? DumpJson(ChatApiErrorValue(g.api, GenerationError(g)))
                                   : ResponseBody(g);
  };
  if (g.ended) {
    if (g.failed_or_cancelled()) return SendError(out, GenerationError(g), g.api);
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
    g.encoded.clear();
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

std::optional<ApiError> CompletionEndpoint::Translate(ChatApi api, bool count_tokens,
                                                      const nlohmann::ordered_json& body,
                                                      nlohmann::ordered_json* chat) const {
  switch (api) {
    case ChatApi::kAnthropic: {
      MessagesLimits limits;
      return TranslateMessagesRequest(body, limits, count_tokens, chat);
    }
    case ChatApi::kResponses:
      return TranslateResponsesRequest(body, count_tokens, chat);
    case ChatApi::kOpenAi:
    case ChatApi::kNative:
      break;
  }
  *chat = body;
  return std::nullopt;
}

std::optional<ApiError> CompletionEndpoint::Prepare(Engine& engine, ChatApi api, bool chat,
                                                    bool count_tokens, std::string_view body_text,
                                                    CompletionRequest* params, ChatPlan* plan,
                                                    NativeRequest* native) {
  // A large body's JSON tree can take ~20x its bytes (a 1 MiB array of small
  // numbers: ~20 MB): such bodies are prepared a few at a time, and what they
  // used is given back to the system after (issue 20: every HTTP thread kept
  // 12-25 MB after one max-size request).
  const bool large = body_text.size() >= kLargeBody;
  if (large) large_bodies_.acquire();
  std::optional<ApiError> error;
  {
    auto body = ParseJsonStrict(body_text, "request body", RequestJsonLimits(options_));
    if (!body.ok()) {
      error = InvalidField("", body.status().message(), "invalid_json");
    } else {
      RequestLimits request_limits;
      request_limits.vocab_size =
          std::min<int64_t>(engine.tokenizer().vocab_size(), engine.model().config().vocab_size);
      // A chat template renders tools and schemas in the client's key order;
      // the strict parse above already bounded depth and refused duplicates.
      nlohmann::ordered_json ordered;
      if (chat) ordered = nlohmann::ordered_json::parse(body_text, nullptr, false);
      if (api == ChatApi::kAnthropic || api == ChatApi::kResponses) {
        // Anthropic Messages and Responses bodies become chat bodies.
        nlohmann::ordered_json translated;
        error = Translate(api, count_tokens, ordered, &translated);
        if (!error) {
          ordered = std::move(translated);
          *body = json::parse(ordered.dump());
        }
      }
      if (native != nullptr) {
        NativeLimits native_limits;
        native_limits.base = request_limits;
        error = ParseNativeRequest(*body, native->infill, native_limits, native);
        if (!error) {
          *params = native->request;
          error = NativePromptTokens(*native, engine.tokenizer(), &plan->prompt);
        }
        if (!error && native->json_schema) {
          error = CompileJsonConstraint(engine, vocabularies_, *native->json_schema, "json_schema",
                                        plan);
        }
      } else if (!error) {
        error = ParseCompletionRequest(*body, chat, request_limits, params,
                                       chat && !ordered.is_discarded() ? &ordered : nullptr);
      }
      if (!error && chat) error = PlanChat(engine, vocabularies_, *params, plan);
      if (!error && !chat && native == nullptr) {
        plan->prompt = params->prompt_is_ids ? params->prompt_ids : engine.Encode(params->prompt_text);
      }
      if (!error && !chat && !params->grammar.empty()) {
        error = CompileGrammarConstraint(engine, vocabularies_, params->grammar, plan);
      }
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

void CompletionEndpoint::CountTokens(const ServingModel& model, ChatApi api, const HttpRequest& req,
                                     ResponseStream& out) {
  CompletionRequest params;
  ChatPlan plan;
  if (auto e = Prepare(*model.engine, api, true, true, req.body, &params, &plan)) {
    return SendError(out, *e, api);
  }
  HttpResponse r;
  r.content_type = "application/json";
  r.body = DumpJson({{"input_tokens", plan.prompt.size()}});
  out.Send(std::move(r));
}

void CompletionEndpoint::ApplyTemplate(const ServingModel& model, const HttpRequest& req,
                                       ResponseStream& out) {
  // llama-server's field for the generation prompt; this server always ends
  // the prompt with it (as chat completions render it), so false is refused.
  std::string body = req.body;
  auto parsed = ParseJsonStrict(body, "request body", RequestJsonLimits(options_));
  if (parsed.ok() && parsed->is_object() && parsed->contains("add_generation_prompt")) {
    const json& v = (*parsed)["add_generation_prompt"];
    if (!v.is_boolean()) {
      return SendError(out, InvalidField("add_generation_prompt", "expected a boolean",
                                         "invalid_type"));
    }
    if (!v.get<bool>()) {
      return SendError(out, InvalidField("add_generation_prompt",
                                         "only true is served: the prompt always ends with the "
                                         "assistant's turn, as chat completions render it"));
    }
    parsed->erase("add_generation_prompt");
    body = parsed->dump();
  }
  CompletionRequest params;
  ChatPlan plan;
  if (auto e = Prepare(*model.engine, ChatApi::kOpenAi, true, false, body, &params, &plan)) {
    return SendError(out, *e);
  }
  HttpResponse r;
  r.content_type = "application/json";
  r.body = DumpJson({{"prompt", plan.prompt_text}});
  out.Send(std::move(r));
}

void CompletionEndpoint::Handle(const ServingModel& model, bool chat, const HttpRequest& req,
                                ResponseStream& out) {
  Run(model, ChatApi::kOpenAi, chat, req, out);
}

void CompletionEndpoint::HandleChatApi(const ServingModel& model, ChatApi api,
                                       const HttpRequest& req, ResponseStream& out) {
  Run(model, api, true, req, out);
}

void CompletionEndpoint::HandleNative(const ServingModel& model, bool infill,
                                      const HttpRequest& req, ResponseStream& out) {
  Run(model, ChatApi::kNative, false, req, out, infill);
}

void CompletionEndpoint::Run(const ServingModel& model, ChatApi api, bool chat,
                             const HttpRequest& req, ResponseStream& out, bool infill) {
  Engine& engine = *model.engine;
  CompletionRequest params;
  ChatPlan plan;
  NativeRequest native;
  native.infill = infill;
  if (auto e = Prepare(engine, api, chat, false, req.body, &params, &plan,
                       api == ChatApi::kNative ? &native : nullptr)) {
    return SendError(out, *e, api);
  }
  std::vector<int32_t>& prompt = plan.prompt;
  const int64_t n_prompt = int64_t(prompt.size());
  // The prompt (empty, longer than the context, ids outside the vocabulary)
  // is validated once, by Scheduler::Submit, whose typed error becomes the
  // 400 (param "messages" for chat). OpenAI defaults: 16 tokens for
  // completions, the rest of the context for chat. A budget past the context
  // is cut to fit and ends with finish_reason "length".
  const int64_t room = model.context - n_prompt;
  // llama-server's n_predict -1 (its default): the rest of the context.
  const int64_t budget =
      std::min(params.max_tokens.value_or(chat || api == ChatApi::kNative ? room : 16), room);
  const size_t n = size_t(params.n);

  const char* id_prefix = api == ChatApi::kAnthropic   ? "msg_"
                          : api == ChatApi::kResponses ? "resp_"
                          : chat                       ? "chatcmpl-"
                                                       : "cmpl-";
  const std::string id = RandomId(id_prefix);
  auto g = std::make_shared<Generation>(engine.tokenizer(), id, options_.model_name, chat,
                                        params.logprobs, params.stream && params.include_usage,
                                        unwritten_, n);
  g->prompt_tokens = n_prompt;
  g->api = api;
  if (api == ChatApi::kAnthropic) {
    g->encoder = std::make_unique<AnthropicEncoder>(id, options_.model_name);
  } else if (api == ChatApi::kResponses) {
    // The response echoes the request's settings as the client sent them.
    const nlohmann::ordered_json request =
        nlohmann::ordered_json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    g->encoder = std::make_unique<ResponsesEncoder>(id, options_.model_name, request);
  } else if (api == ChatApi::kNative) {
    g->native = std::make_unique<NativeFormatter>(engine.tokenizer(), native, options_.model_name,
                                                  model.context, budget);
    g->native_prompt = engine.tokenizer().Decode(prompt);
  }
  if (params.echo) {
    g->echo = params.prompt_is_ids ? engine.tokenizer().Decode(prompt) : params.prompt_text;
  }
  if (chat) {
    for (Choice& c : g->choices) {
      ChatOutput::Options o = plan.output;
      o.id_prefix = RandomId("").substr(0, 8);
      c.chat.emplace(std::move(o));
    }
  }

  // n sequences of the same prompt; seeds base, base + 1, ...
  const uint64_t seed = params.seed ? *params.seed : std::random_device{}();
  std::vector<Request> requests(n);
  // Each sequence holds a slot of GET /slots until the response ends.
  struct SlotClaims {
    SlotTable& table;
    int64_t task;
    std::vector<int> ids;
    ~SlotClaims() {
      for (int id : ids) table.Release(id, task);
    }
  } claims{slots_, next_task_++, {}};
  for (size_t i = 0; i < n; ++i) {
    Request& request = requests[i];
    request.prompt = prompt;
    request.options.max_new_tokens = budget;
    request.options.sampling = params.sampling;
    request.options.sampling.seed = seed + i;
    if (!params.ignore_eos) request.options.stop_tokens = engine.StopTokens();
    request.options.stop_strings = params.stop;
    request.options.logit_bias = params.logit_bias;
    request.logprobs = params.logprobs;
    request.top_logprobs = params.logprobs ? params.top_logprobs : 0;
    if (plan.constraint) request.constraint = plan.constraint->NewState();
    const int slot = slots_.Claim(model.parallel, claims.task, n_prompt, budget);
    claims.ids.push_back(slot);
    request.on_event = [channel = g->channel, i, slots = &slots_, slot, task = claims.task,
                        delay = options_.debug_token_delay](const RequestEvent& ev) {
      if (ev.kind == RequestEvent::Kind::kToken) slots->Decoded(slot, task);
      channel->Push(ev, i);
      if (delay.count() > 0 && ev.kind == RequestEvent::Kind::kToken) {
        std::this_thread::sleep_for(delay);
      }
    };
  }
  g->params = std::move(params);
  for (size_t i = 0; i < n; ++i) {
    auto handle = model.service->Submit(std::move(requests[i]));
    if (!handle.ok()) {
      for (size_t j = 0; j < i; ++j) g->choices[j].handle->Cancel();
      g->channel->Close();
      ApiError e = SubmitError(handle.status(), chat);
      if (e.code == "context_length_exceeded") {
        // llama-server's fields, for clients that read them.
        e.extra = {{"n_prompt_tokens", n_prompt}, {"n_ctx", model.context}};
      }
      return SendError(out, e, api);
    }
    g->choices[i].handle = *handle;
  }
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
    CancelAll(*g);
  }
  Record(*g, metrics_);
  tracker_.Leave();
}

}  // namespace anymoe
