// POST /admin/experts: live expert swap (docs/server.md, "Live expert swap").
// The reference for a swapped model is another file: tools/gen_expert_swap_golden.py
// writes tests/golden/expert_swap/mixtral_l1_e3e5.gguf, the Mixtral golden with
// experts 3 and 5 of layer 1 replaced byte for byte by the `gguf` package, and
// the upload holding those new weights; a server on the original file that
// applies the upload must produce exactly what that file produces.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

#include "server/admin_experts.h"
#include "server_fixture.h"

namespace anymoe::testing {
namespace {

using nlohmann::json;

const char* kAdminKey = "admin-secret";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string SwapGolden(const std::string& name) { return GoldenPath("expert_swap/" + name); }

std::unique_ptr<Engine> LoadOwnEngine(const std::string& path) {
  EngineOptions o;
  o.model_path = path;
  o.threads = 1;
  o.progress = false;
  o.experts.cache = "off";  // every weight resident: what a swap replaces
  auto e = Engine::Load(o);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? std::move(e).value() : nullptr;
}

// Eight distinct token prompts within the golden's 512-token vocabulary.
std::vector<int32_t> Prompt(int i) {
  std::vector<int32_t> p;
  for (int k = 0; k < 6 + i; ++k) p.push_back(int32_t((37 * (i + 1) + 101 * k) % 500 + 3));
  return p;
}

// The logits of every position of each prompt, straight from the model (no
// scheduler may be running on it).
std::vector<float> AllLogits(Engine& engine) {
  std::vector<float> out;
  for (int i = 0; i < 8; ++i) {
    const std::vector<int32_t> p = Prompt(i);
    auto cache = engine.model().NewCache(64);
    EXPECT_TRUE(cache.ok());
    auto logits = engine.model().Forward(p, **cache, /*all_logits=*/true);
    EXPECT_TRUE(logits.ok()) << logits.status().message();
    std::vector<float> host(size_t(logits->elements()));
    engine.backend().ReadF32(*logits, host);
    out.insert(out.end(), host.begin(), host.end());
  }
  return out;
}

bool BitwiseEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

json Completion(int i) {
  return {{"prompt", Prompt(i)}, {"max_tokens", 20}, {"temperature", 0}};
}

class ExpertSwapTest : public ServerTest {
 protected:
  ServerOptions Options() const {
    ServerOptions o;
    o.admin_key = kAdminKey;
    o.model_name = "mixtral";
    return o;
  }
  void Start(Engine& engine, ServerOptions o, SchedulerOptions s = {}) {
    StartServer(o, s, true, "", &engine);
  }
  void Stop() { TearDown(); }
  httplib::Result Upload(const std::string& body, const std::string& query,
                         const std::string& key = kAdminKey) const {
    httplib::Headers h;
    if (!key.empty()) h.emplace("X-Admin-Key", key);
    return Client()->Post(("/admin/experts" + query).c_str(), h, body, "application/octet-stream");
  }
  // Texts of the eight prompts, one request at a time.
  std::vector<std::string> Sequential() const {
    std::vector<std::string> texts;
    for (int i = 0; i < 8; ++i) {
      StreamResult r = Stream("/v1/completions", Completion(i));
      EXPECT_EQ(r.status, 200) << r.body;
      texts.push_back(r.text);
    }
    return texts;
  }
  std::string Metrics() const {
    auto res = Client()->Get("/metrics");
    return res ? res->body : "";
  }
};

TEST(ExpertSwapQuery, ParsesLayerAndExperts) {
  for (const char* query : {"/admin/experts?layer=2&experts=0,7,3",
                            "/admin/experts?experts=0%2C7%2c3&layer=2"}) {
    auto t = ParseExpertSwapQuery(query);
    ASSERT_TRUE(t.ok()) << t.status().message();
    EXPECT_EQ(t->layer, 2);
    EXPECT_EQ(t->experts, (std::vector<int64_t>{0, 7, 3}));
  }
  for (const char* bad : {"/admin/experts", "/admin/experts?layer=1", "/admin/experts?experts=1",
                          "/admin/experts?layer=x&experts=1", "/admin/experts?layer=1&experts=",
                          "/admin/experts?layer=1&experts=1,,2", "/admin/experts?layer=-1&experts=1",
                          "/admin/experts?layer=1&experts=1&layer=2",
                          "/admin/experts?layer=1&experts=1&other=3",
                          "/admin/experts?layer=99999999999&experts=1",
                          "/admin/experts?layer=1&experts=1%2", "/admin/experts?layer=1&experts=1%zz"}) {
    auto r = ParseExpertSwapQuery(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), "invalid_query") << bad;
  }
}

// Without --admin-key the route does not exist; with it, only that key opens
// it (the API key does not).
TEST_F(ExpertSwapTest, AdminRouteNeedsItsOwnKey) {
  std::unique_ptr<Engine> engine = LoadOwnEngine(GoldenPath("moe_gguf/mixtral.gguf"));
  ASSERT_TRUE(engine);
  const std::string upload = ReadFile(SwapGolden("upload_l1_e3e5.gguf"));
  ServerOptions plain = Options();
  plain.admin_key.clear();
  Start(*engine, plain);
  auto res = Upload(upload, "?layer=1&experts=3,5");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  Stop();

  ServerOptions o = Options();
  o.api_key = "api-secret";
  Start(*engine, o);
  res = Upload(upload, "?layer=1&experts=3,5", "");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
  EXPECT_EQ(ParseBody(res)["error"]["code"], "admin_key_required");
  res = Upload(upload, "?layer=1&experts=3,5", "api-secret");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 403);
  EXPECT_EQ(ParseBody(res)["error"]["code"], "invalid_admin_key");
  res = Upload(upload, "?layer=1&experts=3,5", "admin-secreT");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 403);
  // The admin key is no API key either.
  res = Client()->Get("/v1/models", httplib::Headers{{"Authorization", "Bearer admin-secret"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
}

// Every hostile upload is refused with its code, and the model's logits stay
// bitwise what they were.
TEST_F(ExpertSwapTest, HostileUploadsChangeNothing) {
  std::unique_ptr<Engine> engine = LoadOwnEngine(GoldenPath("moe_gguf/mixtral.gguf"));
  ASSERT_TRUE(engine);
  const std::vector<float> before = AllLogits(*engine);
  const std::string good = ReadFile(SwapGolden("upload_l1_e3e5.gguf"));
  ASSERT_GT(good.size(), 1000u);
  struct Case {
    std::string body, query, code;
    int status;
  };
  std::vector<Case> cases = {
      {ReadFile(SwapGolden("bad_shape.gguf")), "?layer=1&experts=3,5", "invalid_shape", 400},
      {ReadFile(SwapGolden("bad_dtype.gguf")), "?layer=1&experts=3,5", "invalid_dtype", 400},
      {ReadFile(SwapGolden("non_finite.gguf")), "?layer=1&experts=3,5", "non_finite", 400},
      {ReadFile(SwapGolden("extra_tensor.gguf")), "?layer=1&experts=3,5", "unexpected_tensor", 400},
      {ReadFile(SwapGolden("missing_tensor.gguf")), "?layer=1&experts=3,5", "missing_tensor", 400},
      {good.substr(0, good.size() / 2), "?layer=1&experts=3,5", "invalid_upload", 400},
      {good.substr(0, 100), "?layer=1&experts=3,5", "invalid_upload", 400},
      {good.substr(0, good.size() - 1), "?layer=1&experts=3,5", "invalid_upload", 400},
      {"", "?layer=1&experts=3,5", "invalid_upload", 400},
      {std::string(4096, 'G'), "?layer=1&experts=3,5", "invalid_upload", 400},
      {good, "?layer=1&experts=3", "invalid_shape", 400},      // holds two experts
      {good, "?layer=1&experts=3,8", "invalid_expert", 400},   // the layer has 0-7
      {good, "?layer=1&experts=3,3", "invalid_expert", 400},
      {good, "?layer=0&experts=3,5", "missing_tensor", 400},   // the file's tensors are layer 1's
      {good, "?layer=3&experts=3,5", "not_moe_layer", 400},
      {good, "?layer=1", "invalid_query", 400},
  };
  size_t largest = 0;
  for (const Case& c : cases) largest = std::max(largest, c.body.size());
  ServerOptions o = Options();
  o.max_body_bytes = largest + 16;
  Start(*engine, o);
  for (const Case& c : cases) {
    auto res = Upload(c.body, c.query);
    ASSERT_TRUE(res) << c.code;
    EXPECT_EQ(res->status, c.status) << c.code << ": " << res->body;
    EXPECT_EQ(ParseBody(res)["error"]["code"], c.code) << res->body;
  }
  // Over the body limit: the transport refuses it before the handler runs.
  auto res = Upload(good + std::string(largest + 17 - good.size(), '\0'), "?layer=1&experts=3,5");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 413);
  // Wrong key, with a good body.
  res = Upload(good, "?layer=1&experts=3,5", "nope");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 403);
  EXPECT_NE(Metrics().find("anymoe_model_version 0"), std::string::npos) << Metrics();
  EXPECT_EQ(service_->model_version(), 0u);
  Stop();  // the scheduler thread is joined: the model is ours again
  EXPECT_TRUE(BitwiseEqual(AllLogits(*engine), before));
}

// The swapped model is the other file: logits bitwise equal to running
// mixtral_l1_e3e5.gguf directly, and different from the original's.
TEST_F(ExpertSwapTest, SwappedModelEqualsTheTargetFile) {
  std::unique_ptr<Engine> engine = LoadOwnEngine(GoldenPath("moe_gguf/mixtral.gguf"));
  std::unique_ptr<Engine> target = LoadOwnEngine(SwapGolden("mixtral_l1_e3e5.gguf"));
  ASSERT_TRUE(engine && target);
  const std::vector<float> original = AllLogits(*engine);
  const std::vector<float> expected = AllLogits(*target);
  ASSERT_FALSE(BitwiseEqual(original, expected));  // the swap matters for these prompts
  Start(*engine, Options());
  auto res = Upload(ReadFile(SwapGolden("upload_l1_e3e5.gguf")), "?layer=1&experts=3,5");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(ParseBody(res)["model_version"], 1);
  EXPECT_EQ(res->get_header_value("X-Model-Version"), "1");
  EXPECT_NE(Metrics().find("anymoe_model_version 1"), std::string::npos) << Metrics();
  Stop();
  EXPECT_TRUE(BitwiseEqual(AllLogits(*engine), expected));
}

// Eight concurrent streams while the swap is requested: each runs on one
// version from its first token to its last. The ones running when the swap
// came finish on version 0 (drain); eight more, queued while it waited, start
// on version 1. Each response equals the same request served alone on that
// version (version 1 served alone from the target file).
TEST_F(ExpertSwapTest, SwapMidStreamUnderEightStreams) {
  std::unique_ptr<Engine> target = LoadOwnEngine(SwapGolden("mixtral_l1_e3e5.gguf"));
  ASSERT_TRUE(target);
  Start(*target, Options());
  const std::vector<std::string> v1 = Sequential();
  Stop();
  std::unique_ptr<Engine> engine = LoadOwnEngine(GoldenPath("moe_gguf/mixtral.gguf"));
  ASSERT_TRUE(engine);
  ServerOptions o = Options();
  o.debug_token_delay = std::chrono::milliseconds(15);  // 20 tokens: ~300 ms per stream
  SchedulerOptions s;
  s.max_parallel = 8;
  Start(*engine, o, s);
  const std::vector<std::string> v0 = Sequential();
  const uint64_t generated = service_->stats().generated_tokens;
  int differ = 0;
  for (int i = 0; i < 8; ++i) differ += v0[size_t(i)] != v1[size_t(i)];
  ASSERT_GT(differ, 0) << "the swap changes no response: the test would prove nothing";

  std::vector<StreamResult> first(8), second(8);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] { first[size_t(i)] = Stream("/v1/completions", Completion(i)); });
  }
  // All eight decoding (each past its first token) before the swap is asked for.
  ASSERT_TRUE(Eventually(
      [&] {
        const SchedulerStats st = service_->stats();
        return st.running == 8 && st.generated_tokens >= generated + 8;
      },
      std::chrono::seconds(20)));
  int swap_status = 0;
  json swap_body;
  std::thread admin([&] {
    auto res = Upload(ReadFile(SwapGolden("upload_l1_e3e5.gguf")), "?layer=1&experts=3,5");
    if (res) {
      swap_status = res->status;
      swap_body = ParseBody(res);
    }
  });
  ASSERT_TRUE(Eventually([&] { return service_->stats().model_change_pending; },
                         std::chrono::seconds(20)));
  EXPECT_EQ(service_->model_version(), 0u);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] { second[size_t(i)] = Stream("/v1/completions", Completion(i)); });
  }
  admin.join();
  for (std::thread& t : threads) t.join();
  ASSERT_EQ(swap_status, 200) << swap_body.dump();
  EXPECT_EQ(swap_body["model_version"], 1);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(first[size_t(i)].status, 200);
    EXPECT_EQ(second[size_t(i)].status, 200);
    EXPECT_EQ(first[size_t(i)].text, v0[size_t(i)]) << "stream " << i << " started on version 0";
    EXPECT_EQ(second[size_t(i)].text, v1[size_t(i)]) << "stream " << i << " queued during the swap";
  }
  EXPECT_NE(Metrics().find("anymoe_model_version 1"), std::string::npos);
}

}  // namespace
}  // namespace anymoe::testing
