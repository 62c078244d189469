// Test helpers: an OpenAiServer on 127.0.0.1 (any free port) in this process,
// backed by the real Scheduler over tests/golden/llama_tiny, and an HTTP client
// that posts JSON and reads SSE streams with the same parser bench-serve uses.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "loadgen/sse_reader.h"
#include "runtime/engine.h"
#include "runtime/scheduler.h"
#include "server/completion_service.h"
#include "server/openai_server.h"

namespace anymoe::testing {

inline std::string GoldenPath(const std::string& rel) {
  return std::string(ANYMOE_GOLDEN_DIR) + "/" + rel;
}

// A tiny golden model (tests/golden/`golden`) served with a real template
// (tests/golden/chat/templates/`tmpl`; chat_template.jinja takes precedence)
// and a context long enough for tool prompts (their configs say 128; RoPE is
// computed for any position, and the weights are random anyway).
inline std::string ModelWithTemplate(const std::string& golden, const std::string& tmpl) {
  namespace fs = std::filesystem;
  using nlohmann::json;
  const fs::path src = GoldenPath(golden);
  const fs::path out = fs::path(::testing::TempDir()) / ("anymoe_chat_" + src.filename().string() +
                                                         "_" + fs::path(tmpl).stem().string());
  // Reused only when its links still resolve (they point into the checkout
  // that made them, which may be gone).
  if (fs::exists(out / "chat_template.jinja") && fs::exists(out / "model.safetensors")) {
    return out.string();
  }
  fs::remove_all(out);
  fs::create_directories(out);
  for (const char* f :
       {"model.safetensors", "tokenizer.json", "tokenizer_config.json", "generation_config.json"}) {
    fs::create_symlink(fs::absolute(src / f), out / f);
  }
  json config = json::parse(std::ifstream(src / "config.json"));
  config["max_position_embeddings"] = 4096;
  std::ofstream(out / "config.json") << config.dump();
  fs::copy_file(GoldenPath("chat/templates/" + tmpl), out / "chat_template.jinja");
  return out.string();
}

// The tiny GLM-5 golden with the GLM-5.2 template.
inline std::string Glm5Folder() {
  static const std::string dir = ModelWithTemplate("moe/glm_moe_dsa", "glm-5.2.jinja");
  return dir;
}

// One engine per model path for the whole test binary (loading is the slow part).
inline Engine& SharedEngine(const std::string& path = GoldenPath("llama_tiny")) {
  static std::map<std::string, std::unique_ptr<Engine>> engines;
  auto it = engines.find(path);
  if (it == engines.end()) {
    EngineOptions o;
    o.model_path = path;
    o.threads = 1;
    o.progress = false;
    auto e = Engine::Load(o);
    EXPECT_TRUE(e.ok()) << e.status().message();
    it = engines.emplace(path, std::move(e).value()).first;
  }
  return *it->second;
}

struct StreamResult {
  int status = 0;
  std::string body;                    // the raw body (non-200, or the whole stream)
  std::vector<nlohmann::json> events;  // parsed data: payloads before [DONE]
  bool done = false;                   // saw data: [DONE]
  std::string text;                    // concatenated text / delta.content
  std::string finish_reason;
  nlohmann::json usage;
};

// Posts `body` with "stream": true through `client` and collects the events.
// `stop_after_chunks` > 0 closes the connection after that many text chunks
// (a client that leaves).
inline StreamResult StreamRequest(httplib::Client& client, const std::string& path,
                                  nlohmann::json body, int stop_after_chunks = 0,
                                  const httplib::Headers& headers = {}) {
  body["stream"] = true;
  StreamResult r;
  SseReader sse;
  int chunks = 0;
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.headers = headers;
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.response_handler = [&](const httplib::Response& res) {
    r.status = res.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    r.body.append(data, n);
    bool keep = true;
    sse.Feed(std::string_view(data, n), [&](std::string_view payload) {
      if (payload == "[DONE]") {
        r.done = true;
        return;
      }
      nlohmann::json e = nlohmann::json::parse(payload);
      if (e.contains("choices") && !e["choices"].empty()) {
        const auto& c = e["choices"][0];
        std::string piece;
        if (c.contains("text")) piece = c["text"].get<std::string>();
        if (c.contains("delta") && c["delta"].contains("content")) {
          piece = c["delta"]["content"].get<std::string>();
        }
        r.text += piece;
        if (!piece.empty()) ++chunks;
        if (!c["finish_reason"].is_null()) r.finish_reason = c["finish_reason"];
      }
      if (e.contains("usage") && !e["usage"].is_null()) r.usage = e["usage"];
      r.events.push_back(std::move(e));
      if (stop_after_chunks > 0 && chunks >= stop_after_chunks) keep = false;
    });
    return keep;
  };
  client.send(req);
  return r;
}

class ServerTest : public ::testing::Test {
 protected:
  // Starts a server; `ready` false leaves it loading (no model yet). `engine`
  // (else the shared one of `model`): a test that changes its model's weights
  // brings its own.
  void StartServer(ServerOptions options = {}, SchedulerOptions sched = {}, bool ready = true,
                   const std::string& model = GoldenPath("llama_tiny"),
                   Engine* engine = nullptr) {
    options.host = "127.0.0.1";
    options.port = 0;
    options.log_requests = false;
    if (options.model_name.empty()) options.model_name = "llama_tiny";
    server_ = std::make_unique<OpenAiServer>(options);
    ASSERT_TRUE(server_->Bind().ok());
    server_->Start();
    engine_ = engine != nullptr ? engine : &SharedEngine(model);
    if (sched.context > engine_->context()) sched.context = engine_->context();
    // As `anymoe serve` sets it.
    if (!sched.between_steps) sched.between_steps = [this] { server_->AwaitResponseWrites(); };
    context_ = sched.context;
    parallel_ = sched.max_parallel;
    auto s = Scheduler::Create(*engine_, sched);
    ASSERT_TRUE(s.ok()) << s.status().message();
    service_ = SchedulerService(std::move(s).value());
    if (ready) MakeReady();
  }
  void MakeReady() { server_->SetReady({engine_, service_.get(), context_, parallel_}); }

  void TearDown() override {
    if (server_) server_->Stop();
    service_.reset();  // joins the scheduler thread, whose between-steps hook calls server_
    server_.reset();
  }

  std::unique_ptr<httplib::Client> Client() const {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    c->set_read_timeout(30);
    c->set_connection_timeout(5);
    return c;
  }

  httplib::Result Post(const std::string& path, const std::string& body,
                       const httplib::Headers& headers = {}) const {
    return Client()->Post(path.c_str(), headers, body, "application/json");
  }
  httplib::Result PostJson(const std::string& path, const nlohmann::json& body,
                           const httplib::Headers& headers = {}) const {
    return Post(path, body.dump(), headers);
  }

  // Posts with "stream": true and collects the events. `stop_after_chunks` > 0
  // closes the connection after that many text chunks (a client that leaves).
  StreamResult Stream(const std::string& path, nlohmann::json body, int stop_after_chunks = 0,
                      const httplib::Headers& headers = {}) const {
    return StreamRequest(*Client(), path, std::move(body), stop_after_chunks, headers);
  }

  // Waits up to `timeout` for `pred`.
  template <typename Pred>
  static bool Eventually(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      if (pred()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return pred();
  }

  std::unique_ptr<OpenAiServer> server_;
  Engine* engine_ = nullptr;
  std::unique_ptr<CompletionService> service_;
  int64_t context_ = 0;
  int parallel_ = 1;
};

inline nlohmann::json ParseBody(const httplib::Result& res) {
  return nlohmann::json::parse(res->body, nullptr, /*allow_exceptions=*/false);
}

}  // namespace anymoe::testing
