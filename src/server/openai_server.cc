#include "server/openai_server.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <httplib.h>

#include <csignal>
#include <cstdio>
#include <ctime>

#include "formats/parse_util.h"
#include "runtime/engine.h"
#include "server/api_error.h"
#include "server/auth.h"
#include "server/completion_endpoint.h"
#include "server/completion_service.h"
#include "server/http_task_queue.h"
#include "server/sse.h"
#include "server/web_page.h"

namespace anymoe {
namespace {

using nlohmann::json;

constexpr const char* kJson = "application/json";
constexpr int kListenBacklog = 1024;  // capped by net.core.somaxconn

void SendError(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  if (e.status == 503) res.set_header("Retry-After", "1");
  res.set_content(ApiErrorJson(e), kJson);
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
      e.message = "method not allowed";
      break;
    case 411:
      e.code = "length_required";
      e.message = "a request body needs a Content-Length header (chunked bodies are refused)";
      break;
    case 413:
      e.code = "request_too_large";
      e.message = "the request body is larger than the limit";
      break;
    case 414:
      e.code = "uri_too_long";
      e.message = "the request URI is too long";
      break;
    case 503:
      e.type = "unavailable_error";
      e.code = "too_many_connections";
      e.message = "too many connections; retry later";
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

// Answers `res` and makes cpp-httplib close the connection after it: for
// requests whose body we refuse to read, so leftover bytes are never parsed as
// the next request. The body is written whole, then the provider reports
// failure, which ends the connection.
void SendErrorAndClose(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  auto body = std::make_shared<std::string>(ApiErrorJson(e));
  res.set_header("Connection", "close");
  res.set_content_provider(body->size(), kJson,
                           [body](size_t offset, size_t length, httplib::DataSink& sink) {
                             sink.write(body->data() + offset, length);
                             return false;
                           });
}

// Control bytes and quotes escaped, long paths cut: a log line stays one line.
std::string LogSafe(const std::string& s) {
  std::string q = QuoteName(s);
  return q.substr(1, q.size() - 2);
}

bool ExpectsBody(const std::string& method) {
  return method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE";
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

OpenAiServer::OpenAiServer(ServerOptions options)
    : options_(std::move(options)), http_(std::make_unique<httplib::Server>()) {
  loopback_ = IsLoopbackHost(options_.host);
  completions_ = std::make_unique<CompletionEndpoint>(options_, metrics_, tracker_, unwritten_);
  const size_t threads = options_.http_threads > 0 ? size_t(options_.http_threads) : 80;
  http_->new_task_queue = [threads] { return new HttpTaskQueue(threads, threads); };
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_read_timeout(options_.read_timeout);
  http_->set_write_timeout(options_.write_timeout);
  http_->set_keep_alive_timeout(options_.keep_alive_timeout.count());
  http_->set_tcp_nodelay(true);
  http_->set_socket_options([this](socket_t sock) {
    httplib::default_socket_options(sock);
    listen_fd_ = sock;
  });
  RegisterRoutes();
}

OpenAiServer::~OpenAiServer() { Stop(); }

void OpenAiServer::AddRoute(const std::string& method, const std::string& path, bool is_public,
                            Handler handler) {
  routes_.push_back({method, path, is_public});
  // Every handler checks the key itself as well: POST bodies are read before
  // routing, so the pre-routing check leaves those requests to this one.
  auto guarded = [this, is_public, handler = std::move(handler)](const httplib::Request& req,
                                                                 httplib::Response& res) {
    if (!is_public && !Authorized(req)) return SendError(res, ErrorFor(401));
    handler(req, res);
  };
  if (method == "GET") {
    http_->Get(path, guarded);
  } else if (method == "POST") {
    http_->Post(path, guarded);
  }
}

void OpenAiServer::RegisterRoutes() {
  using std::placeholders::_1;
  using std::placeholders::_2;
  AddRoute("GET", "/health", true, std::bind(&OpenAiServer::HandleHealth, this, _1, _2));
  AddRoute("GET", "/", true, std::bind(&OpenAiServer::HandlePage, this, _1, _2));
  AddRoute("GET", "/v1/models", false, std::bind(&OpenAiServer::HandleModels, this, _1, _2));
  AddRoute("GET", "/metrics", false, std::bind(&OpenAiServer::HandleMetrics, this, _1, _2));
  for (bool chat : {false, true}) {
    AddRoute("POST", chat ? "/v1/chat/completions" : "/v1/completions", false,
             [this, chat](const httplib::Request& req, httplib::Response& res) {
               const ServingModel* model = Serving(res);
               if (model == nullptr) return;
               completions_->Handle(*model, chat, req, res);
             });
  }
  if (!options_.cors_origin.empty()) {
    // Preflights carry no credentials; they reveal nothing but the CORS policy.
    http_->Options(".*", [](const httplib::Request&, httplib::Response& res) { res.status = 204; });
  }

  http_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    using R = httplib::Server::HandlerResponse;
    if (HttpTaskQueue::OnOverflowThread()) {  // over the connection limit
      if (options_.log_requests) {
        std::fprintf(stderr, "anymoe: %s \"%s %s\" refused: too many connections\n",
                     LogSafe(req.remote_addr).c_str(), LogSafe(req.method).c_str(),
                     LogSafe(req.path).c_str());
      }
      res.set_header("Retry-After", "1");
      SendErrorAndClose(res, ErrorFor(503));
      return R::Handled;
    }
    if (!HostAllowed(req)) {
      SendErrorAndClose(res, ErrorFor(403));
      return R::Handled;
    }
    ApplyCors(req, res);
    const bool has_body = ExpectsBody(req.method);
    if (has_body && (req.has_header("Transfer-Encoding") || !req.has_header("Content-Length"))) {
      SendErrorAndClose(res, ErrorFor(411));
      return R::Handled;
    }
    if (!has_body && req.get_header_value_count("Content-Length") > 0 &&
        req.get_header_value("Content-Length") != "0") {
      SendErrorAndClose(res, ErrorFor(400));  // a body we would not read
      return R::Handled;
    }
    if (req.method == "OPTIONS" && !options_.cors_origin.empty()) return R::Unhandled;
    // Requests with a body are checked after it was read (see AddRoute and the
    // error handler), so the connection stays in step.
    if (!has_body && !Authorized(req)) {
      bool is_public = false;
      for (const RouteInfo& r : routes_) {
        if (r.is_public && r.path == req.path && (req.method == "GET" || req.method == "HEAD")) {
          is_public = true;
        }
      }
      if (!is_public) {
        SendError(res, ErrorFor(401));
        return R::Handled;
      }
    }
    return R::Unhandled;
  });

  // JSON bodies for errors cpp-httplib raises itself (404, 413, 400 on a
  // malformed request), and 401 instead of 404 for clients without the key, so
  // unknown paths reveal nothing either.
  http_->set_error_handler(httplib::Server::HandlerWithResponse(
      [this](const httplib::Request& req, httplib::Response& res) {
        using R = httplib::Server::HandlerResponse;
        if (!res.body.empty() || res.content_provider_) return R::Unhandled;
        int status = res.status;
        if ((status == 404 || status == 405) && !Authorized(req)) status = 401;
        res.status = status;
        res.set_content(ApiErrorJson(ErrorFor(status)), kJson);
        return R::Handled;
      }));
  http_->set_exception_handler([](const httplib::Request&, httplib::Response& res,
                                  std::exception_ptr) { SendError(res, ErrorFor(500)); });
  http_->set_logger(
      [this](const httplib::Request& req, const httplib::Response& res) { LogAndCount(req, res); });
}

bool OpenAiServer::Authorized(const httplib::Request& req) const {
  if (options_.api_key.empty()) return true;
  const std::string authorization = req.get_header_value("Authorization");
  const std::string x_api_key = req.get_header_value("X-Api-Key");
  return ConstantTimeEquals(PresentedApiKey(authorization, x_api_key), options_.api_key);
}

// DNS rebinding: a page on evil.example that resolves to 127.0.0.1 sends
// "Host: evil.example"; on a loopback bind only loopback names are accepted.
bool OpenAiServer::HostAllowed(const httplib::Request& req) const {
  if (!loopback_) return true;
  std::string host = req.get_header_value("Host");
  if (host.empty()) return true;  // HTTP/1.0 clients
  if (host.front() == '[') {
    const size_t close = host.find(']');
    host = close == std::string::npos ? host : host.substr(0, close + 1);
  } else if (const size_t colon = host.find(':'); colon != std::string::npos) {
    host = host.substr(0, colon);
  }
  return IsLoopbackHost(host);
}

void OpenAiServer::ApplyCors(const httplib::Request& req, httplib::Response& res) const {
  if (options_.cors_origin.empty() || !req.has_header("Origin")) return;
  const std::string origin = req.get_header_value("Origin");
  if (options_.cors_origin != "*" && origin != options_.cors_origin) return;
  res.set_header("Access-Control-Allow-Origin", options_.cors_origin == "*" ? "*" : origin);
  res.set_header("Vary", "Origin");
  if (req.method == "OPTIONS") {
    res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Api-Key");
    res.set_header("Access-Control-Max-Age", "600");
  }
}

void OpenAiServer::LogAndCount(const httplib::Request& req, const httplib::Response& res) {
  std::string endpoint = "other";
  for (const RouteInfo& r : routes_) {
    if (r.path == req.path) endpoint = r.path;
  }
  metrics_.CountResponse(endpoint, res.status);
  if (options_.log_requests) {
    std::fprintf(stderr, "anymoe: %s \"%s %s\" %d\n", LogSafe(req.remote_addr).c_str(),
                 LogSafe(req.method).c_str(), LogSafe(req.path).c_str(), res.status);
  }
}

const ServingModel* OpenAiServer::Serving(httplib::Response& res) const {
  if (draining_.load()) {
    SendError(res, Unavailable("the server is shutting down", "shutting_down"));
    return nullptr;
  }
  if (!ready_.load(std::memory_order_acquire)) {
    SendError(res, Unavailable("the model is loading", "model_loading"));
    return nullptr;
  }
  return &model_;
}

void OpenAiServer::HandleHealth(const httplib::Request&, httplib::Response& res) {
  if (draining_.load()) {
    res.status = 503;
    res.set_content(R"({"status":"shutting down"})", kJson);
  } else if (!ready_.load(std::memory_order_acquire)) {
    res.status = 503;
    res.set_content(R"({"status":"loading"})", kJson);
  } else {
    res.set_content(R"({"status":"ok"})", kJson);
  }
}

void OpenAiServer::HandleModels(const httplib::Request&, httplib::Response& res) {
  json model = {{"id", options_.model_name},
                {"object", "model"},
                {"created", int64_t(std::time(nullptr))},
                {"owned_by", "anymoe"}};
  if (ready_.load(std::memory_order_acquire)) model["context_length"] = model_.context;
  res.set_content(DumpJson({{"object", "list"}, {"data", json::array({model})}}), kJson);
}

void OpenAiServer::HandleMetrics(const httplib::Request&, httplib::Response& res) {
  MetricsSnapshot snapshot;
  SchedulerStats stats;
  RoutingStats routing;
  snapshot.ready = ready_.load(std::memory_order_acquire) && !draining_.load();
  if (ready_.load(std::memory_order_acquire)) {
    stats = model_.service->stats();
    snapshot.scheduler = &stats;
    // The scheduler copies the model's counters between steps, under its
    // lock; reading the model directly would race with the forward pass.
    routing = model_.service->routing_stats();
    snapshot.routing = &routing;
  }
  res.set_content(metrics_.Render(snapshot), "text/plain; version=0.0.4; charset=utf-8");
}

void OpenAiServer::HandlePage(const httplib::Request&, httplib::Response& res) {
  const std::string_view page = ChatPageHtml();
  res.set_header("Content-Security-Policy",
                 "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                 "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'");
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Referrer-Policy", "no-referrer");
  res.set_content(page.data(), page.size(), "text/html; charset=utf-8");
}

Status OpenAiServer::Bind() {
  if (options_.port == 0) {
    port_ = http_->bind_to_any_port(options_.host);
    if (port_ < 0) return Status::Error("cannot bind to " + options_.host + " (any port)");
  } else {
    if (!http_->bind_to_port(options_.host, options_.port)) {
      return Status::Error("cannot bind to " + options_.host + ":" + std::to_string(options_.port) +
                           " (in use, or not an address of this machine)");
    }
    port_ = options_.port;
  }
  // cpp-httplib 0.11 listens with a backlog of 5: bursts of new connections
  // overflow it while the accept thread waits for a core, and the kernel
  // then drops or resets handshakes (seen as rare ECONNRESET under load).
  // listen() on a listening socket only changes its backlog.
  if (listen_fd_ >= 0) ::listen(listen_fd_, kListenBacklog);
  return Status::Ok();
}

void OpenAiServer::Start() {
  // cpp-httplib 0.11 writes without MSG_NOSIGNAL: a client that resets its
  // connection mid-write would raise SIGPIPE and kill the whole process.
  std::signal(SIGPIPE, SIG_IGN);
  listen_thread_ = std::thread([this] { http_->listen_after_bind(); });
  // stop() is a no-op until the accept loop runs; wait for it so Stop() works.
  for (int i = 0; i < 2000 && !http_->is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

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

void OpenAiServer::Stop() {
  if (http_->is_running() || listen_thread_.joinable()) http_->stop();
  if (listen_thread_.joinable()) listen_thread_.join();
}

}  // namespace anymoe
