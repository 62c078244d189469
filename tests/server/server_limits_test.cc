// Resource limits and crash classes of the server (reliability.md C3, C6, C7,
// F5, E2): connections past the limit get a clear 503 and the server recovers;
// a model whose logits go NaN fails that request with a 500 numerical_error,
// streamed or not, and the server keeps serving; token ids and max_tokens
// are range-checked; request JSON nesting is capped before any tree is built.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "server_fixture.h"

namespace anymoe::testing {
namespace {

using nlohmann::json;

class ServerLimits : public ServerTest {
 protected:
  // A connected socket that has sent `bytes` (nothing: an idle connection;
  // part of a request: one in progress).
  int Connection(const std::string& bytes = "") const {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(uint16_t(server_->port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    if (!bytes.empty()) {
      EXPECT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), ssize_t(bytes.size()));
    }
    return fd;
  }
};

// Connections are limited in number; a connection past the limit replaces
// one that is idle (it holds nothing anybody waits for), and gets a 503 only
// when every open connection is in the middle of a request.
TEST_F(ServerLimits, ConnectionsPastTheLimitGet503AndTheServerRecovers) {
  ServerOptions o;
  o.http_threads = 2;
  o.max_connections = 4;
  StartServer(o);
  std::vector<int> busy;
  for (int i = 0; i < 4; ++i) busy.push_back(Connection("GET /health HTTP/1.1\r\n"));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // all four accepted and read
  auto res = Client()->Get("/health");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 503) << res->body;
  const json body = ParseBody(res);
  EXPECT_EQ(body["error"]["code"], "too_many_connections") << res->body;
  EXPECT_EQ(res->get_header_value("Retry-After"), "1");
  for (int fd : busy) ::close(fd);
  EXPECT_TRUE(Eventually([&] {
    auto r = Client()->Get("/health");
    return r && r->status == 200;
  }));
  auto ok = PostJson("/v1/completions", {{"prompt", "hi"}, {"max_tokens", 2}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  // Idle connections make room for new ones instead.
  std::vector<int> idle;
  for (int i = 0; i < 4; ++i) idle.push_back(Connection());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  res = Client()->Get("/health");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200) << res->body;
  for (int fd : idle) ::close(fd);
}

// A copy of llama_tiny whose final norm has a NaN: every logit is NaN.
std::string NanModel() {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("anymoe_nan_model_" + std::to_string(getpid()));
  fs::create_directories(dir);
  for (const char* f : {"config.json", "tokenizer.json", "tokenizer_config.json",
                        "generation_config.json", "model.safetensors"}) {
    fs::copy_file(GoldenPath(std::string("llama_tiny/") + f), dir / f,
                  fs::copy_options::overwrite_existing);
  }
  std::fstream st(dir / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
  uint64_t n = 0;
  st.read(reinterpret_cast<char*>(&n), 8);
  std::string header(n, '\0');
  st.read(header.data(), std::streamsize(n));
  const json h = json::parse(header);
  const json& norm = h.at("model.norm.weight");
  EXPECT_EQ(norm.at("dtype"), "F32");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  st.seekp(std::streamoff(8 + n + norm.at("data_offsets")[0].get<uint64_t>()));
  st.write(reinterpret_cast<const char*>(&nan), sizeof(nan));
  return dir.string();
}

TEST_F(ServerLimits, NanLogitsFailThatRequestWithANumericalError) {
  const std::string model = NanModel();
  StartServer({}, {}, true, model);
  auto res = PostJson("/v1/completions", {{"prompt", "hi"}, {"max_tokens", 4}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 500) << res->body;
  const json body = ParseBody(res);
  EXPECT_EQ(body["error"]["code"], "numerical_error") << res->body;
  EXPECT_NE(body["error"]["message"].get<std::string>().find("NaN"), std::string::npos);

  const StreamResult s = Stream("/v1/completions", {{"prompt", "hi"}, {"max_tokens", 4}});
  EXPECT_EQ(s.status, 200);
  ASSERT_FALSE(s.events.empty()) << s.body;
  EXPECT_EQ(s.events.back()["error"]["code"], "numerical_error") << s.body;
  EXPECT_TRUE(s.done);
  EXPECT_TRUE(s.text.empty());  // no garbage token was sampled

  // The failed requests freed their slots; the server still answers.
  auto health = Client()->Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_TRUE(Eventually([&] { return service_->stats().running == 0; }));
  EXPECT_EQ(service_->stats().kv_blocks_used, 0);
  std::filesystem::remove_all(model);
}

TEST_F(ServerLimits, TokenIdsAndMaxTokensAreRangeChecked) {
  StartServer();
  const int64_t vocab = engine_->tokenizer().vocab_size();
  for (const json& prompt : {json::array({-1}), json::array({vocab}), json::array({int64_t(1) << 31}),
                             json::array({1, 2, int64_t(1) << 40}), json::array({1.5})}) {
    SCOPED_TRACE(prompt.dump());
    auto res = PostJson("/v1/completions", {{"prompt", prompt}, {"max_tokens", 1}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400) << res->body;
    EXPECT_EQ(ParseBody(res)["error"]["param"], "prompt");
  }
  for (const json& max_tokens : {json(0), json(-1), json(int64_t(1) << 40), json(1.5), json("8")}) {
    SCOPED_TRACE(max_tokens.dump());
    auto res = PostJson("/v1/completions", {{"prompt", "hi"}, {"max_tokens", max_tokens}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400) << res->body;
    EXPECT_EQ(ParseBody(res)["error"]["param"], "max_tokens");
  }
  // A budget past the context is cut to fit and ends with "length".
  auto res = PostJson("/v1/completions",
                      {{"prompt", "hi"}, {"max_tokens", int64_t(1) << 30}, {"temperature", 0},
                       {"ignore_eos", true}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(ParseBody(res)["choices"][0]["finish_reason"], "length");
}

TEST_F(ServerLimits, DeepNestingIsRefusedInMessagesAndTools) {
  StartServer();
  for (const char* field : {"messages", "tools"}) {
    SCOPED_TRACE(field);
    const std::string body = std::string("{\"") + field + "\": " + std::string(100000, '[') +
                             std::string(100000, ']') + "}";
    auto res = Post("/v1/chat/completions", body);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400) << res->body;
    EXPECT_NE(res->body.find("nesting"), std::string::npos) << res->body;
  }
}

}  // namespace
}  // namespace anymoe::testing
