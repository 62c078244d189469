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
  // --admin-key: the key of the admin routes (POST /admin/experts), sent as
  // "X-Admin-Key: KEY"; "": those routes do not exist (404). Distinct from
  // api_key: the API key does not open them, nor this key the API.
  std::string admin_key;
  std::string cors_origin;  // "": no CORS headers; "*" or one origin
  std::string model_name;   // the id in /v1/models and responses
  size_t max_body_bytes = 1 << 20;
  int json_max_depth = 32;
  // JSON values and objects/arrays in one request body: a token-id prompt of
  // 131,072 ids fits; a max-size body of tiny values (`[{},{},...]`), whose
  // tree takes ~35x its bytes and ~1 s of a sanitised build's CPU to parse
  // (twice for chat: once strictly, once in key order), stops early.
  uint64_t json_max_values = 1 << 17;
  uint64_t json_max_containers = 1 << 15;
  // Requests handled at once (0: 80): a streamed generation holds one until
  // its last event. As many more complete requests may wait for one; past
  // that, 503 too_many_connections.
  int http_threads = 0;
  // Open connections (0: max(256, 2 x http_threads)). A new one past the
  // limit replaces the connection idle longest, or gets 503 when none is
  // idle. Each open connection may buffer up to max_body_bytes.
  int max_connections = 0;
  // From a request's first byte to the end of its body (408 past it): slow
  // clients are dropped however they trickle.
  std::chrono::milliseconds request_timeout{10000};
  std::chrono::milliseconds write_timeout{30000};      // each write of a response
  std::chrono::milliseconds keep_alive_timeout{3000};  // idle between requests
  bool log_requests = true;  // one line per request on stderr
  bool slots_endpoint = true;  // GET /slots (off: 501, as llama-server's --no-slots)
  // Test hook: sleep this long on the scheduler thread after each token, to
  // make a tiny model slow enough to fill queues and disconnect mid-stream.
  std::chrono::milliseconds debug_token_delay{0};
};

// What serves generation requests once the model is loaded; must outlive the server.
struct ServingModel {
  Engine* engine = nullptr;
  CompletionService* service = nullptr;
  int64_t context = 0;  // tokens per sequence (prompt + generated)
  int parallel = 1;     // sequences decoded at once (GET /slots lists as many)
};

}  // namespace anymoe
