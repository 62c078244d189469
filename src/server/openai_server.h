// The OpenAI-compatible HTTP server: /health, /v1/models, /v1/completions,
// /v1/chat/completions (streamed as SSE or not), Anthropic's /v1/messages
// (and /v1/messages/count_tokens), OpenAI's /v1/responses, /metrics and the
// chat page at /. It listens before the model is loaded (/health says 503 "loading" until
// SetReady), maps each request to CompletionService::Submit, cancels a request
// when its client goes away, and drains on shutdown. Security defaults follow
// reliability.md §3: loopback bind, API key on every route but /health and the
// static page, constant-time compare, no CORS unless configured, Host checked
// on loopback, 1 MiB body limit, JSON depth limit, bounded connections. The
// transport (HTTP parsing, deadlines, connection limits) is HttpServer; this
// class is its HttpHandler: routes, auth and the Host check run on each
// request's header, before its body is read.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/request_tracker.h"
#include "server/server_options.h"

namespace anymoe {

class CompletionEndpoint;

// A registered route, for tests that walk the table (auth coverage).
struct RouteInfo {
  std::string method;
  std::string path;
  bool is_public = false;  // served without the API key
};

class OpenAiServer : private HttpHandler {
 public:
  explicit OpenAiServer(ServerOptions options);
  ~OpenAiServer() override;  // Stop()s if still running
  OpenAiServer(const OpenAiServer&) = delete;
  OpenAiServer& operator=(const OpenAiServer&) = delete;

  // Binds the listening socket; the bound port is port() (useful with port 0).
  Status Bind();
  // Serves on a background thread until Stop().
  void Start();
  int port() const { return http_->port(); }

  // The model is loaded: generation requests are served from now on.
  void SetReady(const ServingModel& model);
  // Graceful shutdown: /health and new requests get 503, the service lets
  // running requests finish until `deadline` and cancels the rest, responses
  // are flushed, then the server stops. Returns when it has stopped.
  void Drain(std::chrono::steady_clock::time_point deadline);
  // Stops at once (open streams are cut).
  void Stop();

  const std::vector<RouteInfo>& routes() const { return routes_; }
  ServerMetrics& metrics() { return metrics_; }

  // Generation requests between arrival and the end of their response.
  int in_flight() const { return tracker_.count(); }
  // Open HTTP connections (idle ones included).
  size_t open_connections() const { return http_->open_connections(); }

  // For SchedulerOptions::between_steps: waits until the HTTP threads have
  // written every event handed to them, or for `limit` at most. On a machine
  // with as many busy threads as cores, writes left to run during the next
  // forward pass preempt the backend's threads there, and a preempted thread
  // stalls the whole parallel region it is part of; written between steps,
  // they take cores that would otherwise wait. The limit bounds what a client
  // that stopped reading can cost the others per step.
  void AwaitResponseWrites(std::chrono::microseconds limit = std::chrono::microseconds(1000));
  // Responses holding events not yet written.
  int unwritten() const { return unwritten_.count(); }

 private:
  using Handler = std::function<void(const HttpRequest&, ResponseStream&)>;
  struct Route {
    RouteInfo info;
    Handler handler;
  };

  // HttpHandler.
  std::optional<HttpResponse> CheckHeader(const HttpRequest& head) override;
  void Handle(const HttpRequest& request, ResponseStream& out) override;
  HttpResponse Refusal(int status, std::string_view code, std::string_view message) override;
  void Answered(const HttpRequest& request, int status) override;

  void AddRoute(const std::string& method, const std::string& path, bool is_public,
                Handler handler);
  void RegisterRoutes();
  // The route for `request` (HEAD is served as GET), or null.
  const Route* FindRoute(const HttpRequest& request) const;
  bool Authorized(const HttpRequest& req) const;
  bool HostAllowed(const HttpRequest& req) const;
  HttpHeaders CorsHeaders(const HttpRequest& req) const;
  // Null while loading or draining, after answering `out` with a 503 (in
  // the error shape of the API `path` belongs to).
  const ServingModel* Serving(ResponseStream& out, std::string_view path = "") const;

  void HandleHealth(const HttpRequest& req, ResponseStream& out);
  void HandleModels(const HttpRequest& req, ResponseStream& out);
  void HandleMetrics(const HttpRequest& req, ResponseStream& out);
  void HandleProps(const HttpRequest& req, ResponseStream& out);
  void HandleRouting(const HttpRequest& req, ResponseStream& out);
  void HandlePage(const HttpRequest& req, ResponseStream& out);
  // One of the page's embedded libraries, as JavaScript.
  void HandleScript(std::string_view body, ResponseStream& out);

  ServerOptions options_;
  std::unique_ptr<CompletionEndpoint> completions_;
  std::vector<Route> route_table_;
  std::vector<RouteInfo> routes_;
  bool loopback_ = true;
  std::unique_ptr<HttpServer> http_;  // stopped by the destructor before any member goes

  ServingModel model_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> draining_{false};
  RequestTracker tracker_;
  RequestTracker unwritten_;
  ServerMetrics metrics_;
};

// True for 127.0.0.0/8, ::1 and "localhost".
bool IsLoopbackHost(const std::string& host);

// The host of a Host header value ("name", "name:port", "[v6]", "[v6]:port"),
// or nullopt when the value is not one of those forms (e.g. "[::1]evil.example").
std::optional<std::string> HostOfHeader(std::string_view value);

}  // namespace anymoe
