// How the server is configured (flags of `anymoe serve`) and what it serves
// once the model is loaded.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace anymoe {

class CompletionService;
class Engine;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;          // 0: any free port (see OpenAiServer::port)
  std::string api_key;      // "": no authentication
  std::string cors_origin;  // "": no CORS headers; "*" or one origin
  std::string model_name;   // the id in /v1/models and responses
  size_t max_body_bytes = 1 << 20;
  int json_max_depth = 32;
  // Connections served at once (0: 80); as many more wait for a thread, and
  // connections past that get 503 too_many_connections.
  int http_threads = 0;
  std::chrono::seconds read_timeout{30};
  std::chrono::seconds write_timeout{30};
  std::chrono::seconds keep_alive_timeout{3};
  bool log_requests = true;  // one line per request on stderr
  // Test hook: sleep this long on the scheduler thread after each token, to
  // make a tiny model slow enough to fill queues and disconnect mid-stream.
  std::chrono::milliseconds debug_token_delay{0};
};

// What serves generation requests once the model is loaded; must outlive the server.
struct ServingModel {
  Engine* engine = nullptr;
  CompletionService* service = nullptr;
  int64_t context = 0;  // tokens per sequence (prompt + generated)
};

}  // namespace anymoe
