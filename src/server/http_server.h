// The HTTP/1.x transport under the OpenAI server: Boost.Asio for sockets and
// timers, Boost.Beast's parser for requests. One I/O thread reads every
// connection asynchronously, so a slow, idle or hostile client costs a few
// kilobytes and a timer, never a thread; complete requests go to a pool of
// handler threads (handler_pool.h) that write their responses directly
// (response_stream.h). What it enforces on its own, before any handler runs:
//   - a whole-request deadline (first byte to the end of the body) and an
//     idle deadline between requests; 408 when a request is cut short;
//   - limits on header bytes and count (431), target length (414), body
//     length (413, from Content-Length, before reading the body, with or
//     without Expect: 100-continue); a bad, negative, overflowing or
//     conflicting Content-Length is 400; chunked or unsized bodies are 411;
//   - HTTP/1.0 without chunked encoding, pipelined requests in order,
//     clients that half-close after sending still get their answer;
//   - at most `max_connections` open: a new connection past the limit
//     replaces the longest-idle one, or gets 503 when none is idle; at most
//     `handler_threads + max_waiting` requests handled or waiting (503 past).
// The handler sees each request's header first (CheckHeader: the API key,
// Host and route are checked before the body is read).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "server/http_message.h"
#include "server/response_stream.h"

namespace anymoe {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port (HttpServer::port)
  uint64_t max_body_bytes = 1 << 20;
  size_t max_header_bytes = 32 << 10;  // request line and headers together
  size_t max_header_count = 100;
  size_t max_target_bytes = 8 << 10;
  int handler_threads = 80;
  int max_waiting = 80;  // complete requests waiting for a handler thread
  int max_connections = 256;
  std::chrono::milliseconds request_timeout{10000};    // first byte to end of body
  std::chrono::milliseconds keep_alive_timeout{3000};  // between requests
  std::chrono::milliseconds write_timeout{30000};      // each write of a response
  std::chrono::milliseconds linger{1000};  // input discarded after a refusal, before close
};

// What the transport asks of the application. CheckHeader and Refusal run on
// the I/O thread and must be quick; Handle runs on a handler thread.
class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  // The request's header is complete and its body not yet read: a response
  // to send instead of reading the body (a refused key or Host, an unknown
  // route), or nullopt to read the body and Handle the request.
  virtual std::optional<HttpResponse> CheckHeader(const HttpRequest& head) = 0;
  virtual void Handle(const HttpRequest& request, ResponseStream& out) = 0;
  // The body of an error the transport raises itself (`code`: a short
  // machine-readable reason such as "request_timeout").
  virtual HttpResponse Refusal(int status, std::string_view code, std::string_view message) = 0;
  // Called once per response sent, whoever built it.
  virtual void Answered(const HttpRequest& request, int status) = 0;
};

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, HttpHandler& handler);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens; port() is the bound port.
  Status Bind();
  // Serves on a background I/O thread until Stop().
  void Start();
  // Closes the listener and every connection (responses in progress end),
  // waits for the handler threads, and joins the I/O thread.
  void Stop();
  int port() const;

  size_t open_connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace anymoe
