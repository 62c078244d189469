// The HTTP surface of anymoe serve against an in-process server: health while
// loading, JSON errors for every kind of bad request (invalid JSON, bad field
// types and ranges, prompt longer than the context, too-deep nesting, body
// over the limit, chunked bodies), the API key on every route of the route
// table, CORS off by default, the Host check against DNS rebinding, /v1/models
// and /metrics.
#include <sys/socket.h>
#include <unistd.h>

#include <set>

#include "server/auth.h"
#include "server_fixture.h"

namespace anymoe::testing {
namespace {

using nlohmann::json;

void ExpectError(const httplib::Result& res, int status, const std::string& param = "",
                 const std::string& needle = "") {
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, status) << res->body;
  const json body = ParseBody(res);
  ASSERT_TRUE(body.is_object() && body.contains("error")) << res->body;
  const json& e = body["error"];
  EXPECT_TRUE(e["message"].is_string());
  EXPECT_TRUE(e["type"].is_string());
  EXPECT_TRUE(e.contains("param"));
  EXPECT_TRUE(e.contains("code"));
  if (!param.empty()) {
    EXPECT_EQ(e["param"], param) << res->body;
    // Every 400 that names a field says why in a code, too.
    EXPECT_TRUE(e["code"].is_string() && !e["code"].get<std::string>().empty()) << res->body;
  }
  if (!needle.empty()) {
    EXPECT_NE(e["message"].get<std::string>().find(needle), std::string::npos) << res->body;
  }
  EXPECT_EQ(res->get_header_value("Content-Type"), "application/json");
}

class ServerHttp : public ServerTest {};

TEST_F(ServerHttp, HealthIs503WhileLoadingThen200) {
  StartServer({}, {}, /*ready=*/false);
  auto res = Client()->Get("/health");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_EQ(ParseBody(res)["status"], "loading");
  ExpectError(PostJson("/v1/completions", {{"prompt", "hi"}}), 503);
  MakeReady();
  res = Client()->Get("/health");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(ParseBody(res)["status"], "ok");
}

TEST_F(ServerHttp, ModelsListsTheModel) {
  StartServer();
  auto res = Client()->Get("/v1/models");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  const json body = ParseBody(res);
  EXPECT_EQ(body["object"], "list");
  ASSERT_EQ(body["data"].size(), 1u);
  EXPECT_EQ(body["data"][0]["id"], "llama_tiny");
  EXPECT_EQ(body["data"][0]["context_length"], 128);
}

TEST_F(ServerHttp, InvalidJsonIs400) {
  StartServer();
  for (const char* body : {"", "{", "{\"prompt\": \"hi\",}", "[1,2", "{\"prompt\": NaN}",
                           "{\"prompt\": Infinity}", "\"just a string\"", "{\"a\":1,\"a\":2}"}) {
    SCOPED_TRACE(body);
    ExpectError(Post("/v1/completions", body), 400);
  }
  // Invalid UTF-8 and lone surrogates in strings are rejected by the parser.
  ExpectError(Post("/v1/completions", "{\"prompt\": \"\xff\xfe\"}"), 400);
  ExpectError(Post("/v1/completions", R"({"prompt": "\ud800"})"), 400);
}

TEST_F(ServerHttp, DeepNestingIs400BeforeBuildingIt) {
  StartServer();
  std::string deep =
      "{\"prompt\": \"hi\", \"x\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  ExpectError(Post("/v1/completions", deep), 400, "", "nesting");
  std::string messages =
      "{\"messages\": [{\"role\": \"user\", \"content\": " + std::string(50000, '[') +
      std::string(50000, ']') + "}]}";
  ExpectError(Post("/v1/chat/completions", messages), 400, "", "nesting");
}

// A body of many tiny values builds a tree of ~35x its bytes: past 32,768
// objects and arrays or 131,072 values it is refused (ServerOptions).
TEST_F(ServerHttp, BodiesOfTooManyJsonValuesAre400) {
  StartServer();
  auto repeated = [](const char* head, const char* item, int n, const char* tail) {
    std::string s = head;
    for (int i = 0; i < n; ++i) s += std::string(i ? "," : "") + item;
    return s + tail;
  };
  ExpectError(Post("/v1/completions", repeated(R"({"prompt":"hi","x":[)", "{}", 40000, "]}")),
              400, "", "more than 32768 JSON objects and arrays");
  ExpectError(Post("/v1/chat/completions",
                   repeated(R"({"messages":[{"role":"user","content":"hi"}],"x":[)", "[]", 40000,
                            "]}")),
              400, "", "more than 32768 JSON objects and arrays");
  ExpectError(Post("/v1/completions", repeated(R"({"prompt":"hi","x":[)", "0", 140000, "]}")), 400,
              "", "more than 131072 JSON values");
  // Under both limits the same shapes are only JSON.
  auto under = Post("/v1/completions",
                    repeated(R"({"prompt":"hi","max_tokens":1,"x":[)", "{}", 30000, "]}"));
  ASSERT_TRUE(under);
  EXPECT_EQ(under->status, 200) << under->body;
}

TEST_F(ServerHttp, EveryBadFieldIs400NamingIt) {
  StartServer();
  const json ok = {{"prompt", "hello"}, {"max_tokens", 2}};
  struct Case {
    const char* field;
    json value;
  };
  const std::vector<Case> cases = {
      {"max_tokens", -1},
      {"max_tokens", 0},
      {"max_tokens", 1.5},
      {"max_tokens", "8"},
      {"max_tokens", 1e20},
      {"max_completion_tokens", -5},
      {"temperature", -0.1},
      {"temperature", 2.5},
      {"temperature", "hot"},
      {"top_p", 0},
      {"top_p", 1.01},
      {"top_p", -1},
      {"top_k", -2},
      {"top_k", 0.5},
      {"min_p", 1.5},
      {"min_p", -0.1},
      {"seed", 1.5},
      {"seed", "x"},
      {"stop", 5},
      {"stop", json::array({1})},
      {"stop", ""},
      {"stop", json::array({"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n",
                            "o", "p", "q"})},
      {"n", 17},
      {"n", 0},
      {"stream", "yes"},
      {"logprobs", -1},
      {"logprobs", 21},
      {"logprobs", true},
      {"echo", "yes"},
      {"tools", json::array({1})},
      {"response_format", {{"type", "json_object"}}},
      {"best_of", 3},
      {"frequency_penalty", 0.5},
      {"presence_penalty", 3},
      {"logit_bias", {{"5", 101}}},
      {"logit_bias", {{"-1", 1}}},
      {"logit_bias", 3},
      {"model", 7},
      {"prompt", json::array()},
      {"prompt", ""},
      {"prompt", 42},
      {"prompt", json::array({-1})},
      {"prompt", json::array({512})},
      {"prompt", json::array({int64_t(1) << 31})},
      {"prompt", json::array({"a", "b"})},
      {"ignore_eos", 1},
      {"stream_options", 3},
  };
  for (const Case& c : cases) {
    json body = ok;
    body[c.field] = c.value;
    SCOPED_TRACE(body.dump().substr(0, 200));
    ExpectError(PostJson("/v1/completions", body), 400, c.field);
  }
  ExpectError(PostJson("/v1/completions", {{"max_tokens", 2}}), 400, "prompt");
  ExpectError(PostJson("/v1/completions", json::array({1, 2})), 400);
  // A wrong type and a wrong value are told apart.
  auto res = PostJson("/v1/completions", {{"prompt", "hi"}, {"max_tokens", "8"}});
  EXPECT_EQ(ParseBody(res)["error"]["code"], "invalid_type") << res->body;
  res = PostJson("/v1/completions", {{"prompt", "hi"}, {"max_tokens", -1}});
  EXPECT_EQ(ParseBody(res)["error"]["code"], "invalid_value") << res->body;
}

TEST_F(ServerHttp, BadChatFieldsAre400NamingThem) {
  StartServer();
  const json user = {{"role", "user"}, {"content", "hi"}};
  ExpectError(PostJson("/v1/chat/completions", json::object()), 400, "messages");
  ExpectError(PostJson("/v1/chat/completions", {{"messages", json::array()}}), 400, "messages");
  ExpectError(PostJson("/v1/chat/completions", {{"messages", "hi"}}), 400, "messages");
  ExpectError(
      PostJson("/v1/chat/completions", {{"messages", {{{"role", "wizard"}, {"content", "x"}}}}}),
      400, "messages[0].role");
  ExpectError(PostJson("/v1/chat/completions", {{"messages", {{{"content", "x"}}}}}), 400,
              "messages[0].role");
  ExpectError(
      PostJson("/v1/chat/completions", {{"messages", {user, {{"role", "user"}, {"content", 5}}}}}),
      400, "messages[1].content");
  ExpectError(
      PostJson(
          "/v1/chat/completions",
          {{"messages",
            {{{"role", "user"}, {"content", {{{"type", "image_url"}, {"image_url", "x"}}}}}}}}),
      400, "messages[0].content");
  ExpectError(PostJson("/v1/chat/completions", {{"messages", {user}}, {"top_logprobs", 3}}), 400,
              "top_logprobs");
  ExpectError(PostJson("/v1/chat/completions",
                       {{"messages", {user}}, {"logprobs", true}, {"top_logprobs", 50}}),
              400, "top_logprobs");
  ExpectError(PostJson("/v1/chat/completions", {{"messages", {user}}, {"logprobs", 3}}), 400,
              "logprobs");
  ExpectError(
      PostJson("/v1/chat/completions", {{"messages", {user}}, {"tools", {{{"type", "function"}}}}}),
      400, "tools[0].function");
  ExpectError(PostJson("/v1/chat/completions",
                       {{"messages", {user}}, {"response_format", {{"type", "xml"}}}}),
              400, "response_format.type");
}

TEST_F(ServerHttp, PromptLongerThanTheContextIs400NamingTheLimit) {
  StartServer();
  json ids = json::array();
  for (int i = 0; i < 200; ++i) ids.push_back(5);
  auto res = PostJson("/v1/completions", {{"prompt", ids}, {"max_tokens", 4}});
  ExpectError(res, 400, "prompt", "128");
  EXPECT_EQ(ParseBody(res)["error"]["code"], "context_length_exceeded");
  EXPECT_NE(ParseBody(res)["error"]["message"].get<std::string>().find("200"), std::string::npos);
  // Exactly the context leaves no room to generate.
  ids.erase(ids.begin() + 128, ids.end());
  ExpectError(PostJson("/v1/completions", {{"prompt", ids}}), 400, "prompt", "128");
  // Chat: the rendered conversation counts.
  ExpectError(PostJson("/v1/chat/completions",
                       {{"messages", {{{"role", "user"}, {"content", std::string(2000, 'x')}}}}}),
              400, "messages", "128");
  // A long budget is cut to the context instead: finish_reason "length".
  ids.erase(ids.begin() + 120, ids.end());
  res = PostJson("/v1/completions",
                 {{"prompt", ids}, {"max_tokens", 1000}, {"ignore_eos", true}, {"temperature", 0}});
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json body = ParseBody(res);
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["completion_tokens"], 8);
}

TEST_F(ServerHttp, BodyOverTheLimitIs413) {
  ServerOptions o;
  o.max_body_bytes = 64 * 1024;
  StartServer(o);
  const std::string big = json{{"prompt", std::string(100 * 1024, 'a')}}.dump();
  ExpectError(Post("/v1/completions", big), 413);
  // The server keeps serving on a fresh connection and on the same one.
  auto client = Client();
  client->set_keep_alive(true);
  auto res = client->Post("/v1/completions", big, "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 413);
  res = client->Post("/v1/completions", json{{"prompt", "hi"}, {"max_tokens", 2}}.dump(),
                     "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
}

// Sends raw bytes on a new connection and returns what comes back until the
// server closes it (or 2 s pass).
std::string RawExchange(int port, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return "";
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  [[maybe_unused]] ssize_t sent = send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, size_t(n));
  }
  close(fd);
  return out;
}

TEST_F(ServerHttp, BodiesWithoutContentLengthAre411AndClose) {
  StartServer();
  const std::string chunked =
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n";
  std::string reply = RawExchange(server_->port(), chunked);
  EXPECT_EQ(reply.rfind("HTTP/1.1 411", 0), 0u) << reply;
  EXPECT_NE(reply.find("Connection: close"), std::string::npos) << reply;
  const std::string no_length = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  reply = RawExchange(server_->port(), no_length);
  EXPECT_EQ(reply.rfind("HTTP/1.1 411", 0), 0u) << reply;
}

TEST_F(ServerHttp, ApiKeyGuardsEveryRouteButHealthAndThePage) {
  ServerOptions o;
  o.api_key = "s3cret-key";
  StartServer(o);
  const httplib::Headers none, wrong = {{"Authorization", "Bearer s3cret-kez"}},
                               prefix = {{"Authorization", "Bearer s3cret"}},
                               basic = {{"Authorization", "Basic s3cret-key"}},
                               right = {{"Authorization", "Bearer s3cret-key"}},
                               x_key = {{"X-Api-Key", "s3cret-key"}};
  const json completion = {{"prompt", "hi"}, {"max_tokens", 1}};
  const json chat = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 1}};
  const json responses = {{"input", "hi"}, {"max_output_tokens", 1}};
  const json tokenize = {{"content", "hi"}}, detokenize = {{"tokens", {1, 2}}};
  const json native = {{"prompt", "hi"}, {"n_predict", 1}};
  const json embeddings = {{"input", "hi"}};
  ASSERT_GE(server_->routes().size(), 6u);
  for (const RouteInfo& route : server_->routes()) {
    SCOPED_TRACE(route.method + " " + route.path);
    auto call = [&](const httplib::Headers& h) {
      if (route.method == "GET") return Client()->Get(route.path.c_str(), h);
      const bool is_native = route.path == "/completion" || route.path == "/completions" ||
                             route.path == "/infill";
      const json& body = route.path == "/v1/completions" ? completion
                         : is_native                      ? native
                         : route.path == "/v1/responses"  ? responses
                         : route.path == "/tokenize"      ? tokenize
                         : route.path == "/detokenize"    ? detokenize
                         : route.path.ends_with("/embeddings") ? embeddings
                                                          : chat;
      return Client()->Post(route.path.c_str(), h, body.dump(), "application/json");
    };
    for (const auto* h : {&none, &wrong, &prefix, &basic}) {
      auto res = call(*h);
      ASSERT_TRUE(res);
      if (route.is_public) {
        EXPECT_EQ(res->status, 200);
      } else if (route.path.starts_with("/v1/messages")) {
        // Anthropic's error shape: {"type": "error", "error": {"type", "message"}}.
        EXPECT_EQ(res->status, 401);
        EXPECT_EQ(ParseBody(res)["type"], "error");
        EXPECT_EQ(ParseBody(res)["error"]["type"], "authentication_error");
      } else {
        ExpectError(res, 401);
        EXPECT_EQ(ParseBody(res)["error"]["type"], "authentication_error");
      }
    }
    for (const auto* h : {&right, &x_key}) {
      auto res = call(*h);
      ASSERT_TRUE(res);
      if (route.path == "/infill") {  // past the key: llama_tiny has no FIM tokens
        EXPECT_EQ(ParseBody(res)["error"]["code"], "fim_unsupported") << res->body;
      } else {
        EXPECT_EQ(res->status, 200) << res->body;
      }
    }
  }
  // Only /health (and /v1/health), the static page and its two static scripts are public.
  std::set<std::string> public_routes;
  for (const RouteInfo& r : server_->routes()) {
    if (r.is_public) public_routes.insert(r.path);
  }
  EXPECT_EQ(public_routes,
            (std::set<std::string>{"/health", "/v1/health", "/", "/static/marked.js",
                                   "/static/purify.js"}));
  // Unknown paths and path variants do not reveal anything without the key.
  for (const char* path : {"/v1/nope", "//v1/models", "/v1/models/", "/V1/MODELS", "/v1%2Fmodels",
                           "/health/../v1/models", "/metrics?x=1"}) {
    SCOPED_TRACE(path);
    auto res = Client()->Get(path);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 401) << res->body;
  }
  ExpectError(Client()->Post("/v1/unknown", completion.dump(), "application/json"), 401);
  auto head = Client()->Head("/metrics");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 401);
  // Keep-alive stays in step after a refused POST (its body was read).
  auto client = Client();
  client->set_keep_alive(true);
  auto res = client->Post("/v1/completions", none, completion.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
  res = client->Post("/v1/completions", right, completion.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

TEST(Auth, ConstantTimeEqualsAndKeyExtraction) {
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
  EXPECT_FALSE(ConstantTimeEquals("", "a"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_EQ(PresentedApiKey("Bearer k1", "k2"), "k1");
  EXPECT_EQ(PresentedApiKey("Bearer  k1 ", ""), "k1");
  EXPECT_EQ(PresentedApiKey("Basic k1", "k2"), "k2");
  EXPECT_EQ(PresentedApiKey("", ""), "");
}

TEST_F(ServerHttp, NoCorsHeadersUnlessConfigured) {
  StartServer();
  auto res = Client()->Get("/v1/models", {{"Origin", "http://evil.example"}});
  ASSERT_TRUE(res);
  EXPECT_FALSE(res->has_header("Access-Control-Allow-Origin"));
  res = Client()->Options("/v1/completions", {{"Origin", "http://evil.example"},
                                              {"Access-Control-Request-Method", "POST"}});
  ASSERT_TRUE(res);
  EXPECT_FALSE(res->has_header("Access-Control-Allow-Origin"));
}

TEST_F(ServerHttp, CorsForTheConfiguredOriginOnly) {
  ServerOptions o;
  o.cors_origin = "http://app.example";
  o.api_key = "k";
  StartServer(o);
  auto res = Client()->Options("/v1/chat/completions", {{"Origin", "http://app.example"},
                                                        {"Access-Control-Request-Method", "POST"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 204);
  EXPECT_EQ(res->get_header_value("Access-Control-Allow-Origin"), "http://app.example");
  EXPECT_NE(res->get_header_value("Access-Control-Allow-Headers").find("Authorization"),
            std::string::npos);
  EXPECT_FALSE(res->has_header("Access-Control-Allow-Credentials"));
  res = Client()->Get("/v1/models", {{"Origin", "http://other.example"}, {"X-Api-Key", "k"}});
  ASSERT_TRUE(res);
  EXPECT_FALSE(res->has_header("Access-Control-Allow-Origin"));
}

TEST_F(ServerHttp, ForeignHostHeaderIsRefusedOnLoopback) {
  StartServer();
  auto res = Client()->Get("/v1/models", {{"Host", "evil.example"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 403);
  for (const char* host : {"localhost:8080", "127.0.0.1", "[::1]:80"}) {
    res = Client()->Get("/v1/models", {{"Host", host}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200) << host;
  }
}

TEST_F(ServerHttp, ChatPageIsServedWithAStrictPolicy) {
  StartServer();
  auto res = Client()->Get("/");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(res->body.find("/v1/chat/completions"), std::string::npos);
  EXPECT_NE(res->get_header_value("Content-Security-Policy").find("connect-src 'self'"),
            std::string::npos);
  // No external URLs: nothing to fetch from anywhere but this server.
  EXPECT_EQ(res->body.find("http://"), std::string::npos);
  EXPECT_EQ(res->body.find("https://"), std::string::npos);
}

// serve --spec ngram: the same completion as without drafts, and the drafted
// and accepted tokens on /metrics.
TEST_F(ServerHttp, SpeculativeDraftsAreCountedOnMetrics) {
  std::vector<int32_t> prompt = {5, 9, 13, 17, 21};
  prompt.resize(17, 5);  // the tiny model then repeats itself: n-gram drafts
  const nlohmann::json body = {
      {"prompt", prompt}, {"max_tokens", 24}, {"ignore_eos", true}, {"temperature", 0}};
  StartServer();
  auto plain = PostJson("/v1/completions", body);
  ASSERT_EQ(plain->status, 200);
  server_->Stop();
  service_.reset();
  SchedulerOptions sched;
  sched.spec.kind = SpecKind::kNgram;
  StartServer({}, sched);
  auto spec = PostJson("/v1/completions", body);
  ASSERT_EQ(spec->status, 200);
  EXPECT_EQ(nlohmann::json::parse(spec->body)["choices"][0]["text"],
            nlohmann::json::parse(plain->body)["choices"][0]["text"]);
  std::string m;
  EXPECT_TRUE(Eventually([&] {
    auto res = Client()->Get("/metrics");
    m = res && res->status == 200 ? res->body : "";
    return m.find("anymoe_spec_draft_tokens_total ") != std::string::npos &&
           m.find("anymoe_spec_draft_tokens_total 0") == std::string::npos;
  })) << m;
  EXPECT_NE(m.find("anymoe_spec_accepted_tokens_total "), std::string::npos) << m;
  EXPECT_NE(m.find("anymoe_spec_acceptance_ratio "), std::string::npos) << m;
}

TEST_F(ServerHttp, MetricsInPrometheusFormat) {
  StartServer();
  ASSERT_EQ(
      PostJson("/v1/completions", {{"prompt", "hello"}, {"max_tokens", 5}, {"ignore_eos", true}})
          ->status,
      200);
  ASSERT_EQ(PostJson("/v1/completions", {{"prompt", "hello"}, {"max_tokens", -5}})->status, 400);
  // Responses are counted once written and the scheduler publishes its load
  // after a step: both may trail the reply by a moment.
  const std::vector<std::string> expected = {
      "anymoe_http_requests_total{endpoint=\"/v1/completions\",code=\"200\"} 1",
      "anymoe_http_requests_total{endpoint=\"/v1/completions\",code=\"400\"} 1",
      "anymoe_generation_tokens_total 5",
      "anymoe_requests_finished_total{reason=\"length\"} 1",
      "anymoe_time_to_first_token_seconds_count 1",
      "anymoe_time_to_first_token_seconds_bucket{le=\"+Inf\"} 1",
      "anymoe_time_per_output_token_seconds_count 1",
      "anymoe_e2e_request_latency_seconds_count 1",
      "anymoe_requests_running 0",
      "anymoe_requests_waiting 0",
      "anymoe_kv_cache_blocks_used 0",
      "anymoe_ready 1",
      "# TYPE anymoe_e2e_request_latency_seconds histogram",
      "# TYPE anymoe_prompt_tokens_total counter",
      "anymoe_kv_cache_usage_ratio 0"};
  std::string m;
  EXPECT_TRUE(Eventually([&] {
    auto res = Client()->Get("/metrics");
    if (!res || res->status != 200) return false;
    m = res->body;
    for (const std::string& line : expected) {
      if (m.find(line) == std::string::npos) return false;
    }
    return true;
  }));
  for (const std::string& line : expected) {
    EXPECT_NE(m.find(line), std::string::npos) << line << "\n" << m;
  }
  EXPECT_NE(m.find("anymoe_kv_cache_blocks_total "), std::string::npos);
  // Every sample line is "name{labels} value" or "name value".
  std::istringstream lines(m);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    EXPECT_EQ(line.rfind("anymoe_", 0), 0u) << line;
    EXPECT_NE(line.find(' '), std::string::npos) << line;
  }
  // Dense model: no expert counters.
  EXPECT_EQ(m.find("anymoe_expert_tokens_total"), std::string::npos);
}

TEST_F(ServerHttp, MetricsCountExpertsOfMoeModels) {
  StartServer({}, {}, true, GoldenPath("moe/qwen3_moe"));
  auto res =
      PostJson("/v1/completions",
               {{"prompt", json::array({1, 2, 3, 4})}, {"max_tokens", 4}, {"ignore_eos", true}});
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  res = Client()->Get("/metrics");
  ASSERT_TRUE(res);
  const std::string& m = res->body;
  EXPECT_NE(m.find("# TYPE anymoe_expert_tokens_total counter"), std::string::npos) << m;
  const RoutingStats layers = service_->routing_stats();
  ASSERT_FALSE(layers.layers.empty());
  const std::string first =
      "anymoe_expert_tokens_total{layer=\"" + std::to_string(layers.layers[0]) + "\",expert=\"0\"}";
  EXPECT_NE(m.find(first), std::string::npos) << m;
  // Each token of each MoE layer picks experts_per_token experts: 4 prompt
  // tokens and 3 fed-back ones (the scheduler publishes after its step).
  int64_t sum = 0, expected = 0;
  EXPECT_TRUE(Eventually([&] {
    const RoutingStats routing = service_->routing_stats();
    if (routing.layers.empty()) return false;
    sum = 0;
    for (int64_t c : routing.counts[0]) sum += c;
    expected = 7 * routing.experts_per_token;
    return sum == expected;
  })) << sum
      << " vs " << expected;
}

// GET /routing: the MoE layers are there before this server's first request
// (the chat page learns the layout from it); a request adds tokens x top-k to
// each layer's total. (The engine, and its counts, are shared by the tests.)
TEST_F(ServerHttp, RoutingIsTheExpertCountsAsJson) {
  StartServer({}, {}, true, GoldenPath("moe/qwen3_moe"));
  auto res = Client()->Get("/routing");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json before = ParseBody(res);
  EXPECT_EQ(before["model"], "llama_tiny");  // the fixture's served name
  const int64_t top_k = before["experts_per_token"];
  EXPECT_GT(top_k, 0);
  ASSERT_FALSE(before["layers"].empty());

  res = PostJson("/v1/completions",
                 {{"prompt", json::array({1, 2, 3, 4})}, {"max_tokens", 4}, {"ignore_eos", true}});
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  json after;
  // 4 prompt tokens and 3 fed back, as in MetricsCountExpertsOfMoeModels.
  EXPECT_TRUE(Eventually([&] {
    auto r = Client()->Get("/routing");
    if (!r || r->status != 200) return false;
    after = ParseBody(r);
    return after["layers"][0]["total"].get<int64_t>() -
               before["layers"][0]["total"].get<int64_t>() ==
           7 * top_k;
  })) << after.dump();
  ASSERT_EQ(after["layers"].size(), before["layers"].size());
  for (size_t i = 0; i < after["layers"].size(); ++i) {
    int64_t added = 0;
    for (size_t e = 0; e < after["layers"][i]["counts"].size(); ++e) {
      added += after["layers"][i]["counts"][e].get<int64_t>() -
               before["layers"][i]["counts"][e].get<int64_t>();
    }
    EXPECT_EQ(added, 7 * top_k) << after["layers"][i].dump();
  }
  // Dense models have no layers to draw.
  TearDown();
  StartServer();
  res = Client()->Get("/routing");
  ASSERT_TRUE(res);
  EXPECT_TRUE(ParseBody(res)["layers"].empty()) << res->body;
}

}  // namespace
}  // namespace anymoe::testing
