// The OpenAI-compatible HTTP server: /health, /v1/models, /v1/completions,
// /v1/chat/completions (streamed as SSE or not), /metrics and the chat page at
// /. It listens before the model is loaded (/health says 503 "loading" until
// SetReady), maps each request to CompletionService::Submit, cancels a request
// when its client goes away, and drains on shutdown. Security defaults follow
// reliability.md §3: loopback bind, API key on every route but /health and the
// static page, constant-time compare, no CORS unless configured, Host checked
// on loopback, 1 MiB body limit, JSON depth limit, bounded connections.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "server/metrics.h"
#include "server/request_tracker.h"
#include "server/server_options.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace anymoe {

class CompletionEndpoint;

// A registered route, for tests that walk the table (auth coverage).
struct RouteInfo {
  std::string method;
  std::string path;
  bool is_public = false;  // served without the API key
};

class OpenAiServer {
 public:
  explicit OpenAiServer(ServerOptions options);
  ~OpenAiServer();  // Stop()s if still running
  OpenAiServer(const OpenAiServer&) = delete;
  OpenAiServer& operator=(const OpenAiServer&) = delete;

  // Binds the listening socket; the bound port is port() (useful with port 0).
  Status Bind();
  // Serves on a background thread until Stop().
  void Start();
  int port() const { return port_; }

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
  using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

  void AddRoute(const std::string& method, const std::string& path, bool is_public,
                Handler handler);
  void RegisterRoutes();
  bool Authorized(const httplib::Request& req) const;
  bool HostAllowed(const httplib::Request& req) const;
  void ApplyCors(const httplib::Request& req, httplib::Response& res) const;
  void LogAndCount(const httplib::Request& req, const httplib::Response& res);
  // Null while loading or draining, after answering `res` with a 503.
  const ServingModel* Serving(httplib::Response& res) const;

  void HandleHealth(const httplib::Request& req, httplib::Response& res);
  void HandleModels(const httplib::Request& req, httplib::Response& res);
  void HandleMetrics(const httplib::Request& req, httplib::Response& res);
  void HandlePage(const httplib::Request& req, httplib::Response& res);

  ServerOptions options_;
  std::unique_ptr<httplib::Server> http_;
  std::unique_ptr<CompletionEndpoint> completions_;
  std::vector<RouteInfo> routes_;
  std::thread listen_thread_;
  int port_ = -1;
  int listen_fd_ = -1;  // the listening socket, to deepen its accept backlog
  bool loopback_ = true;

  ServingModel model_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> draining_{false};
  RequestTracker tracker_;
  RequestTracker unwritten_;
  ServerMetrics metrics_;
};

// True for 127.0.0.0/8, ::1 and "localhost".
bool IsLoopbackHost(const std::string& host);

}  // namespace anymoe
