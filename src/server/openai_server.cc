#include "server/openai_server.h"

#include <arpa/inet.h>

#include <cstdio>
#include <ctime>

#include "formats/parse_util.h"
#include "server/admin_experts.h"
#include "runtime/engine.h"
#include "runtime/routing_report.h"
#include "server/api_error.h"
#include "server/auth.h"
#include "server/chat_encoder.h"
#include "server/completion_endpoint.h"
#include "server/completion_service.h"
#include "server/embeddings_endpoint.h"
#include "server/sse.h"
#include "server/token_endpoints.h"
#include "server/web_page.h"
#include "tokenizer/tokenizer.h"

namespace anymoe {
namespace {

using nlohmann::json;

constexpr const char* kJson = "application/json";
constexpr const char* kAdminExperts = "/admin/experts";

// Anthropic Messages routes answer in Anthropic's error shape.
ChatApi ApiOfPath(std::string_view path) {
  return path.starts_with("/v1/messages") ? ChatApi::kAnthropic : ChatApi::kOpenAi;
}

HttpResponse ErrorResponse(const ApiError& e, ChatApi api = ChatApi::kOpenAi) {
  HttpResponse r;
  r.status = e.status;
  r.content_type = kJson;
  r.body = DumpJson(ChatApiErrorValue(api, e));
  if (e.status == 503) r.SetHeader("Retry-After", "1");
  return r;
}

ApiError ErrorFor(int status) {
  ApiError e;
  e.status = status;
  switch (status) {
    case 401:
      e.type = "authentication_error";
      e.code = "invalid_api_key";
      e.message = "missing or invalid API key (send Authorization: Bearer KEY or X-Api-Key)";
      break;
    case 403:
      e.type = "permission_error";
      e.code = "forbidden_host";
      e.message = "the Host header must name this machine (localhost, 127.0.0.1 or [::1])";
      break;
    case 404:
      e.type = "not_found_error";
      e.message = "no such endpoint";
      break;
    case 405:
      e.code = "method_not_allowed";
      e.message = "method not allowed";
      break;
    default:
      if (status >= 500) {
        e.type = "server_error";
        e.message = "internal server error";
      } else {
        e.message = "bad request";
      }
  }
  return e;
}

// Control bytes and quotes escaped, long paths cut: a log line stays one line.
std::string LogSafe(std::string_view s) {
  std::string q = QuoteName(s);
  return q.substr(1, q.size() - 2);
}

bool AllDigits(std::string_view s) {
  if (s.empty() || s.size() > 5) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

}  // namespace

bool IsLoopbackHost(const std::string& host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  in_addr addr{};
  if (inet_pton(AF_INET, host.c_str(), &addr) == 1) {
    return (ntohl(addr.s_addr) >> 24) == 127;
  }
  return false;
}

std::optional<std::string> HostOfHeader(std::string_view value) {
  if (value.empty()) return std::nullopt;
  if (value.front() == '[') {
    const size_t close = value.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    const std::string_view rest = value.substr(close + 1);
    if (!rest.empty() && !(rest.front() == ':' && AllDigits(rest.substr(1)))) return std::nullopt;
    return std::string(value.substr(0, close + 1));
  }
  const size_t colon = value.find(':');
  if (colon == std::string_view::npos) return std::string(value);
  if (!AllDigits(value.substr(colon + 1))) return std::nullopt;  // also bare IPv6
  return std::string(value.substr(0, colon));
}

OpenAiServer::OpenAiServer(ServerOptions options) : options_(std::move(options)) {
  loopback_ = IsLoopbackHost(options_.host);
  completions_ = std::make_unique<CompletionEndpoint>(options_, metrics_, tracker_, unwritten_);
  HttpServerOptions h;
  h.host = options_.host;
  h.port = options_.port;
  h.max_body_bytes = options_.max_body_bytes;
  h.handler_threads = options_.http_threads > 0 ? options_.http_threads : 80;
  h.max_waiting = h.handler_threads;
  h.max_connections = options_.max_connections > 0 ? options_.max_connections
                                                   : std::max(256, 2 * h.handler_threads);
  h.request_timeout = options_.request_timeout;
  h.write_timeout = options_.write_timeout;
  h.keep_alive_timeout = options_.keep_alive_timeout;
  http_ = std::make_unique<HttpServer>(h, static_cast<HttpHandler&>(*this));
  RegisterRoutes();
}

OpenAiServer::~OpenAiServer() { Stop(); }

void OpenAiServer::AddRoute(const std::string& method, const std::string& path, bool is_public,
                            Handler handler) {
  routes_.push_back({method, path, is_public});
  route_table_.push_back({routes_.back(), std::move(handler)});
}

void OpenAiServer::RegisterRoutes() {
  using std::placeholders::_1;
  using std::placeholders::_2;
  AddRoute("GET", "/health", true, std::bind(&OpenAiServer::HandleHealth, this, _1, _2));
  AddRoute("GET", "/v1/health", true, std::bind(&OpenAiServer::HandleHealth, this, _1, _2));
  AddRoute("GET", "/", true, std::bind(&OpenAiServer::HandlePage, this, _1, _2));
  // The OpenAI routes answer without the /v1 prefix too (as llama-server's
  // do), except /completions: there llama-server serves its native API.
  for (const char* path : {"/v1/models", "/models"}) {
    AddRoute("GET", path, false, std::bind(&OpenAiServer::HandleModels, this, _1, _2));
  }
  AddRoute("GET", "/metrics", false, std::bind(&OpenAiServer::HandleMetrics, this, _1, _2));
  AddRoute("GET", "/routing", false, std::bind(&OpenAiServer::HandleRouting, this, _1, _2));
  AddRoute("GET", "/static/marked.js", true,
           [this](const HttpRequest&, ResponseStream& out) { HandleScript(MarkedJs(), out); });
  AddRoute("GET", "/static/purify.js", true,
           [this](const HttpRequest&, ResponseStream& out) { HandleScript(DomPurifyJs(), out); });
  const auto chat_api = [this](ChatApi api, bool count_tokens) {
    return [this, api, count_tokens](const HttpRequest& req, ResponseStream& out) {
      const ServingModel* model = Serving(out, req.path);
      if (model == nullptr) return;
      if (count_tokens) return completions_->CountTokens(*model, api, req, out);
      completions_->HandleChatApi(*model, api, req, out);
    };
  };
  AddRoute("POST", "/v1/messages", false, chat_api(ChatApi::kAnthropic, false));
  AddRoute("POST", "/v1/messages/count_tokens", false, chat_api(ChatApi::kAnthropic, true));
  AddRoute("POST", "/v1/responses", false, chat_api(ChatApi::kResponses, false));
  // llama-server's debugging routes: the template, the tokenizer, the settings.
  AddRoute("POST", "/apply-template", false, [this](const HttpRequest& req, ResponseStream& out) {
    if (const ServingModel* model = Serving(out)) completions_->ApplyTemplate(*model, req, out);
  });
  AddRoute("POST", "/tokenize", false, [this](const HttpRequest& req, ResponseStream& out) {
    if (const ServingModel* model = Serving(out)) {
      HandleTokenize(options_, model->engine->tokenizer(), req, out);
    }
  });
  AddRoute("POST", "/detokenize", false, [this](const HttpRequest& req, ResponseStream& out) {
    if (const ServingModel* model = Serving(out)) {
      const int64_t vocab = std::min<int64_t>(model->engine->tokenizer().vocab_size(),
                                              model->engine->model().config().vocab_size);
      HandleDetokenize(options_, model->engine->tokenizer(), vocab, req, out);
    }
  });
  if (!options_.admin_key.empty()) {
    AddRoute("POST", kAdminExperts, false, [this](const HttpRequest& req, ResponseStream& out) {
      if (const ServingModel* model = Serving(out)) out.Send(AdminReplaceExperts(*model, req));
    });
  }
  AddRoute("GET", "/props", false, std::bind(&OpenAiServer::HandleProps, this, _1, _2));
  AddRoute("GET", "/slots", false, [this](const HttpRequest&, ResponseStream& out) {
    if (!options_.slots_endpoint) {
      ApiError e = ErrorFor(501);
      e.type = "not_supported_error";
      e.message = "the /slots endpoint is off (--no-slots)";
      e.code = "slots_disabled";
      out.Send(ErrorResponse(e));
      return;
    }
    const ServingModel* model = Serving(out);
    if (model == nullptr) return;
    HttpResponse r;
    r.content_type = kJson;
    r.body = DumpJson(completions_->slots().Json(model->parallel, model->context));
    out.Send(std::move(r));
  });
  for (const char* path : {"/v1/completions", "/v1/chat/completions", "/chat/completions"}) {
    const bool chat = std::string_view(path).ends_with("chat/completions");
    AddRoute("POST", path, false, [this, chat](const HttpRequest& req, ResponseStream& out) {
      const ServingModel* model = Serving(out);
      if (model == nullptr) return;
      completions_->Handle(*model, chat, req, out);
    });
  }
  for (const char* path : {"/v1/embeddings", "/embeddings"}) {
    const bool openai = std::string_view(path) == "/v1/embeddings";
    AddRoute("POST", path, false, [this, openai](const HttpRequest& req, ResponseStream& out) {
      if (const ServingModel* model = Serving(out, req.path)) {
        HandleEmbeddings(options_, *model, openai, req, out);
      }
    });
  }
  // llama-server's native generation API.
  for (const char* path : {"/completion", "/completions", "/infill"}) {
    const bool infill = std::string_view(path) == "/infill";
    AddRoute("POST", path, false, [this, infill](const HttpRequest& req, ResponseStream& out) {
      if (const ServingModel* model = Serving(out)) {
        completions_->HandleNative(*model, infill, req, out);
      }
    });
  }
}

const OpenAiServer::Route* OpenAiServer::FindRoute(const HttpRequest& request) const {
  const std::string& method = request.method == "HEAD" ? std::string("GET") : request.method;
  for (const Route& r : route_table_) {
    if (r.info.path == request.path && r.info.method == method) return &r;
  }
  return nullptr;
}

std::optional<HttpResponse> OpenAiServer::CheckHeader(const HttpRequest& head) {
  if (!HostAllowed(head)) {
    HttpResponse r = ErrorResponse(ErrorFor(403));
    r.close = true;
    return r;
  }
  const HttpHeaders cors = CorsHeaders(head);
  const auto answer = [&](HttpResponse r) {
    for (const auto& [k, v] : cors) r.SetHeader(k, v);
    return std::optional<HttpResponse>(std::move(r));
  };
  // Preflights carry no credentials; they reveal nothing but the CORS policy.
  if (head.method == "OPTIONS" && !options_.cors_origin.empty()) {
    HttpResponse r;
    r.status = 204;
    return answer(std::move(r));
  }
  const Route* route = FindRoute(head);
  if (route != nullptr && route->info.is_public) return std::nullopt;
  // Admin routes have their own key, checked before the body is read; without
  // --admin-key they are not registered and answer as unknown paths do.
  if (route != nullptr && route->info.path.starts_with("/admin/")) {
    const std::string_view key = head.Header("X-Admin-Key");
    if (!head.HasHeader("X-Admin-Key")) {
      return answer(Refusal(401, "admin_key_required", "send the admin key as X-Admin-Key: KEY"));
    }
    if (!ConstantTimeEquals(key, options_.admin_key)) {
      return answer(Refusal(403, "invalid_admin_key", "the admin key is wrong"));
    }
    return std::nullopt;
  }
  // Everything else needs the key, checked before the body is read. Unknown
  // paths answer 401 too, so they reveal nothing to clients without it.
  const ChatApi api = ApiOfPath(head.path);
  if (!Authorized(head)) return answer(ErrorResponse(ErrorFor(401), api));
  if (route != nullptr) return std::nullopt;
  bool path_known = false;
  for (const Route& r : route_table_) path_known |= r.info.path == head.path;
  return answer(ErrorResponse(ErrorFor(path_known ? 405 : 404), api));
}

void OpenAiServer::Handle(const HttpRequest& request, ResponseStream& out) {
  for (auto& [k, v] : CorsHeaders(request)) out.AddHeader(std::move(k), std::move(v));
  const Route* route = FindRoute(request);
  if (route == nullptr) {  // CheckHeader answered every other request
    out.Send(ErrorResponse(ErrorFor(404)));
    return;
  }
  route->handler(request, out);
}

HttpResponse OpenAiServer::Refusal(int status, std::string_view code, std::string_view message) {
  ApiError e = ErrorFor(status);
  if (status == 503) e.type = "unavailable_error";
  if (!code.empty()) e.code = std::string(code);
  if (!message.empty()) e.message = std::string(message);
  return ErrorResponse(e);
}

void OpenAiServer::Answered(const HttpRequest& req, int status) {
  std::string endpoint = "other";
  for (const RouteInfo& r : routes_) {
    if (r.path == req.path) endpoint = r.path;
  }
  metrics_.CountResponse(endpoint, status);
  if (options_.log_requests) {
    std::fprintf(stderr, "anymoe: %s \"%s %s\" %d\n", LogSafe(req.remote).c_str(),
                 LogSafe(req.method.empty() ? "-" : req.method).c_str(),
                 LogSafe(req.path.empty() ? "-" : req.path).c_str(), status);
  }
}

bool OpenAiServer::Authorized(const HttpRequest& req) const {
  if (options_.api_key.empty()) return true;
  return ConstantTimeEquals(PresentedApiKey(req.Header("Authorization"), req.Header("X-Api-Key")),
                            options_.api_key);
}

// DNS rebinding: a page on evil.example that resolves to 127.0.0.1 sends
// "Host: evil.example"; on a loopback bind only loopback names are accepted,
// and only in the exact forms name, name:port, [v6], [v6]:port.
bool OpenAiServer::HostAllowed(const HttpRequest& req) const {
  if (!loopback_) return true;
  if (req.HeaderCount("Host") > 1) return false;
  if (!req.HasHeader("Host")) return true;  // HTTP/1.0 clients
  const std::optional<std::string> host = HostOfHeader(req.Header("Host"));
  return host && IsLoopbackHost(*host);
}

HttpHeaders OpenAiServer::CorsHeaders(const HttpRequest& req) const {
  HttpHeaders h;
  if (options_.cors_origin.empty() || !req.HasHeader("Origin")) return h;
  const std::string origin(req.Header("Origin"));
  if (options_.cors_origin != "*" && origin != options_.cors_origin) return h;
  h.emplace_back("Access-Control-Allow-Origin", options_.cors_origin == "*" ? "*" : origin);
  h.emplace_back("Vary", "Origin");
  if (req.method == "OPTIONS") {
    h.emplace_back("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    h.emplace_back("Access-Control-Allow-Headers",
                   "Authorization, Content-Type, X-Api-Key, Anthropic-Version, Anthropic-Beta");
    h.emplace_back("Access-Control-Max-Age", "600");
  }
  return h;
}

const ServingModel* OpenAiServer::Serving(ResponseStream& out, std::string_view path) const {
  if (draining_.load()) {
    out.Send(ErrorResponse(Unavailable("the server is shutting down", "shutting_down"),
                           ApiOfPath(path)));
    return nullptr;
  }
  if (!ready_.load(std::memory_order_acquire)) {
    out.Send(ErrorResponse(Unavailable("the model is loading", "model_loading"), ApiOfPath(path)));
    return nullptr;
  }
  return &model_;
}

void OpenAiServer::HandleHealth(const HttpRequest&, ResponseStream& out) {
  HttpResponse r;
  r.content_type = kJson;
  if (draining_.load()) {
    r.status = 503;
    r.body = R"({"status":"shutting down"})";
  } else if (!ready_.load(std::memory_order_acquire)) {
    r.status = 503;
    r.body = R"({"status":"loading"})";
  } else {
    r.body = R"({"status":"ok"})";
  }
  out.Send(std::move(r));
}

void OpenAiServer::HandleModels(const HttpRequest&, ResponseStream& out) {
  json model = {{"id", options_.model_name},
                {"object", "model"},
                {"created", int64_t(std::time(nullptr))},
                {"owned_by", "anymoe"}};
  if (ready_.load(std::memory_order_acquire)) model["context_length"] = model_.context;
  HttpResponse r;
  r.content_type = kJson;
  r.body = DumpJson({{"object", "list"}, {"data", json::array({model})}});
  out.Send(std::move(r));
}

// llama-server's GET /props: what a client needs to know of the served model
// (its name, context, chat template, special tokens; this server has no
// per-server sampling defaults beyond the OpenAI ones each request may set).
void OpenAiServer::HandleProps(const HttpRequest&, ResponseStream& out) {
  const ServingModel* model = Serving(out);
  if (model == nullptr) return;
  const Tokenizer& tok = model->engine->tokenizer();
  const auto piece = [&tok](int32_t id) { return id < 0 ? json(nullptr) : json(std::string(tok.TokenPiece(id))); };
  json props = {
      {"model_alias", options_.model_name},
      {"n_ctx", model->context},
      {"chat_template", tok.chat_template()},
      {"bos_token", piece(tok.bos_id())},
      {"eos_token", piece(tok.eos_id())},
      {"default_generation_settings",
       {{"n_ctx", model->context},
        {"params", {{"temperature", 1.0}, {"top_p", 1.0}, {"top_k", 0}, {"min_p", 0.0}}}}},
      {"build_info", "anymoe"},
  };
  HttpResponse r;
  r.content_type = kJson;
  r.body = DumpJson(props);
  out.Send(std::move(r));
}

void OpenAiServer::HandleMetrics(const HttpRequest&, ResponseStream& out) {
  MetricsSnapshot snapshot;
  SchedulerStats stats;
  RoutingStats routing;
  snapshot.ready = ready_.load(std::memory_order_acquire) && !draining_.load();
  if (ready_.load(std::memory_order_acquire)) {
    stats = model_.service->stats();
    snapshot.scheduler = &stats;
    snapshot.model_version = model_.service->model_version();
    // The scheduler copies the model's counters between steps, under its
    // lock; reading the model directly would race with the forward pass.
    routing = model_.service->routing_stats();
    snapshot.routing = &routing;
  }
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = metrics_.Render(snapshot);
  out.Send(std::move(r));
}

// Tokens routed to each expert of each MoE layer since load, as `anymoe run
// --routing-stats` writes them (all requests together: the chat page diffs
// two reads around a reply to draw which experts it used).
void OpenAiServer::HandleRouting(const HttpRequest&, ResponseStream& out) {
  const ServingModel* model = Serving(out);
  if (model == nullptr) return;
  HttpResponse r;
  r.content_type = kJson;
  r.body = RoutingStatsJson(model->service->routing_stats(), options_.model_name);
  out.Send(std::move(r));
}

void OpenAiServer::HandleScript(std::string_view body, ResponseStream& out) {
  HttpResponse r;
  r.content_type = "text/javascript; charset=utf-8";
  r.SetHeader("X-Content-Type-Options", "nosniff");
  r.SetHeader("Cache-Control", "public, max-age=86400");
  r.body = std::string(body);
  out.Send(std::move(r));
}

void OpenAiServer::HandlePage(const HttpRequest&, ResponseStream& out) {
  HttpResponse r;
  r.content_type = "text/html; charset=utf-8";
  r.SetHeader("Content-Security-Policy",
              "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'unsafe-inline'; "
              "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'");
  r.SetHeader("X-Content-Type-Options", "nosniff");
  r.SetHeader("Referrer-Policy", "no-referrer");
  r.body = std::string(ChatPageHtml());
  out.Send(std::move(r));
}

Status OpenAiServer::Bind() { return http_->Bind(); }

void OpenAiServer::Start() { http_->Start(); }

void OpenAiServer::SetReady(const ServingModel& model) {
  model_ = model;
  ready_.store(true, std::memory_order_release);
}

void OpenAiServer::Drain(std::chrono::steady_clock::time_point deadline) {
  draining_.store(true);
  if (ready_.load(std::memory_order_acquire)) model_.service->Shutdown(deadline);
  // Every request has its last event now; give the writers a moment to flush.
  tracker_.WaitIdle(std::max(deadline, std::chrono::steady_clock::now()) + std::chrono::seconds(2));
  Stop();
}

void OpenAiServer::AwaitResponseWrites(std::chrono::microseconds limit) {
  unwritten_.WaitIdle(std::chrono::steady_clock::now() + limit);
}

void OpenAiServer::Stop() { http_->Stop(); }

}  // namespace anymoe
