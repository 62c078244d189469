// POST /v1/embeddings (OpenAI's shape) and POST /embeddings (llama-server's)
// over real HTTP: the vectors are transformers' mean-pooled last_hidden_state
// (tools/gen_embedding_golden.py) of each input, texts tokenized by the
// served tokenizer, L2-normalised on the OpenAI route and as embd_normalize
// says on llama-server's; base64 carries the same floats; an input gives the
// same bits alone or batched with others and whatever the prefill chunk; bad
// bodies are 400s in OpenAI's shape with a code; the key guards both routes.
#include <cmath>
#include <cstring>
#include <fstream>

#include "server_fixture.h"

namespace anymoe::testing {
namespace {

using nlohmann::json;

// Engine vs transformers (float32, pooled in float64). The served engine keeps
// GQA keys and values in f16 (the CPU default), which rounds each to 11 bits:
// measured 1.3e-3 on llama_tiny (1.6e-6 with --kv-type f32, and on the GLM-5,
// whose MLA latent cache stays f32).
constexpr double kTolerance = 4e-3;

class ServerEmbeddings : public ServerTest {
 protected:
  void Start(const std::string& golden, int64_t prefill_chunk = 16, ServerOptions o = {}) {
    SchedulerOptions s;
    s.max_parallel = 4;
    s.prefill_chunk = prefill_chunk;
    StartServer(o, s, true, GoldenPath(golden));
    golden_ = json::parse(std::ifstream(GoldenPath(golden + "/embeddings.json")));
  }
  // Each golden case as the request sends it: its text, else its ids.
  json Inputs() const {
    json in = json::array();
    for (const auto& c : golden_["cases"]) in.push_back(c["text"].is_string() ? c["text"] : c["ids"]);
    return in;
  }
  json golden_;
};

std::vector<double> L2(std::vector<double> v) {
  double s = 0;
  for (double x : v) s += x * x;
  for (double& x : v) x /= std::sqrt(s);
  return v;
}

std::vector<float> FromBase64(const std::string& s) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
  };
  std::string bytes;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    const int v = value(c);
    if (v < 0) break;
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      bytes.push_back(char((acc >> bits) & 0xff));
    }
  }
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

void ExpectNear(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) EXPECT_NEAR(got[k], want[k], kTolerance) << "dim " << k;
}

class ServerEmbeddingsModels : public ServerEmbeddings,
                               public ::testing::WithParamInterface<std::string> {};

TEST_P(ServerEmbeddingsModels, MatchTransformersOnBothRoutes) {
  Start(GetParam());
  const auto& cases = golden_["cases"];
  // llama-server's route without normalisation: the pooled mean itself.
  auto raw = PostJson("/embeddings", {{"content", Inputs()}, {"embd_normalize", -1}});
  ASSERT_TRUE(raw);
  ASSERT_EQ(raw->status, 200) << raw->body;
  const json items = ParseBody(raw);
  ASSERT_EQ(items.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(items[i]["index"], i);
    ExpectNear(items[i]["embedding"][0].get<std::vector<double>>(),
               cases[i]["mean"].get<std::vector<double>>());
  }
  // The OpenAI route: L2-normalised, usage counts every input's tokens.
  auto res = PostJson("/v1/embeddings", {{"input", Inputs()}, {"model", "llama_tiny"}});
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json body = ParseBody(res);
  EXPECT_EQ(body["object"], "list");
  EXPECT_EQ(body["model"], "llama_tiny");
  int64_t tokens = 0;
  for (const auto& c : cases) tokens += int64_t(c["ids"].size());
  EXPECT_EQ(body["usage"]["prompt_tokens"], tokens);
  EXPECT_EQ(body["usage"]["total_tokens"], tokens);
  ASSERT_EQ(body["data"].size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(body["data"][i]["object"], "embedding");
    EXPECT_EQ(body["data"][i]["index"], i);
    ExpectNear(body["data"][i]["embedding"].get<std::vector<double>>(),
               L2(cases[i]["mean"].get<std::vector<double>>()));
  }
  // llama-server's default (embd_normalize 2) is the same L2 vector.
  auto l2 = PostJson("/embeddings", {{"content", cases[0]["text"]}});
  ASSERT_TRUE(l2);
  ASSERT_EQ(l2->status, 200) << l2->body;
  EXPECT_EQ(ParseBody(l2)[0]["embedding"][0], body["data"][0]["embedding"]);
}

INSTANTIATE_TEST_SUITE_P(Models, ServerEmbeddingsModels,
                         ::testing::Values("llama_tiny", "moe/glm_moe_dsa"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n) ch = std::isalnum(uint8_t(ch)) ? ch : '_';
                           return n;
                         });

TEST_F(ServerEmbeddings, SameBitsAloneBatchedAndInBase64) {
  Start("llama_tiny", /*prefill_chunk=*/16);
  const json in = Inputs();
  auto batched = PostJson("/v1/embeddings", {{"input", in}});
  ASSERT_TRUE(batched);
  ASSERT_EQ(batched->status, 200) << batched->body;
  const json all = ParseBody(batched)["data"];
  for (size_t i = 0; i < in.size(); ++i) {
    SCOPED_TRACE(i);
    auto alone = PostJson("/v1/embeddings", {{"input", json::array({in[i]})}});
    ASSERT_TRUE(alone);
    ASSERT_EQ(alone->status, 200) << alone->body;
    EXPECT_EQ(ParseBody(alone)["data"][0]["embedding"], all[i]["embedding"]);
    auto b64 = PostJson("/v1/embeddings", {{"input", in[i]}, {"encoding_format", "base64"}});
    ASSERT_TRUE(b64);
    ASSERT_EQ(b64->status, 200) << b64->body;
    const std::vector<float> decoded =
        FromBase64(ParseBody(b64)["data"][0]["embedding"].get<std::string>());
    EXPECT_EQ(decoded, all[i]["embedding"].get<std::vector<float>>());
  }
}

TEST_F(ServerEmbeddings, PrefillChunkDoesNotChangeTheBits) {
  Start("llama_tiny", /*prefill_chunk=*/0);
  auto whole = PostJson("/v1/embeddings", {{"input", Inputs()}});
  ASSERT_TRUE(whole);
  ASSERT_EQ(whole->status, 200) << whole->body;
  TearDown();
  Start("llama_tiny", /*prefill_chunk=*/5);
  auto chunked = PostJson("/v1/embeddings", {{"input", Inputs()}});
  ASSERT_TRUE(chunked);
  ASSERT_EQ(chunked->status, 200) << chunked->body;
  EXPECT_EQ(ParseBody(whole)["data"], ParseBody(chunked)["data"]);
}

TEST_F(ServerEmbeddings, BadBodiesAre400sWithACode) {
  Start("llama_tiny");
  const std::vector<int32_t> too_long(size_t(context_) + 1, 5);
  struct Case {
    std::string body, code;
  };
  const std::vector<Case> bad = {
      {R"({"input": ""})", "empty_input"},
      {R"({"input": []})", "empty_input"},
      {R"({"input": ["a", ""]})", "empty_input"},
      {R"({"input": [[]]})", "empty_input"},
      {R"({})", "missing_field"},
      {R"({"input": 5})", "invalid_type"},
      {R"({"input": [{"a": 1}]})", "invalid_type"},
      {R"({"input": [100000]})", ""},
      {R"({"input": [-1]})", ""},
      {R"({"input": "hi", "encoding_format": "int8"})", ""},
      {R"({"input": "hi", "dimensions": 32})", "unsupported_dimensions"},
      {R"({"input": "hi", "dimensions": "64"})", "invalid_type"},
      {R"({"input": "hi")", "invalid_json"},
      {R"([1, 2])", "invalid_type"},
      {json{{"input", json::array({too_long})}}.dump(), "context_length_exceeded"},
  };
  for (const Case& c : bad) {
    SCOPED_TRACE(c.body.substr(0, 80));
    auto res = Post("/v1/embeddings", c.body);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400) << res->body;
    const json e = ParseBody(res);
    ASSERT_TRUE(e.contains("error")) << res->body;
    EXPECT_EQ(e["error"]["type"], "invalid_request_error");
    ASSERT_TRUE(e["error"]["code"].is_string()) << res->body;
    if (!c.code.empty()) {
      EXPECT_EQ(e["error"]["code"], c.code);
    }
    if (c.code == "context_length_exceeded") {
      EXPECT_EQ(e["error"]["n_ctx"], context_);
      EXPECT_EQ(e["error"]["n_prompt_tokens"], int64_t(too_long.size()));
    }
  }
  // The model's own size is accepted; llama-server's route checks its fields too.
  auto same = PostJson("/v1/embeddings", {{"input", "hi"}, {"dimensions", 64}});
  ASSERT_TRUE(same);
  EXPECT_EQ(same->status, 200) << same->body;
  auto norm = PostJson("/embeddings", {{"content", "hi"}, {"embd_normalize", "two"}});
  ASSERT_TRUE(norm);
  EXPECT_EQ(norm->status, 400) << norm->body;
}

TEST_F(ServerEmbeddings, BehindTheKeyAndTheBodyLimit) {
  ServerOptions o;
  o.api_key = "s3cret-key";
  o.max_body_bytes = 4096;
  Start("llama_tiny", 16, o);
  for (const char* path : {"/v1/embeddings", "/embeddings"}) {
    SCOPED_TRACE(path);
    auto none = PostJson(path, {{"input", "hi"}});
    ASSERT_TRUE(none);
    EXPECT_EQ(none->status, 401);
    auto ok = PostJson(path, {{"input", "hi"}}, {{"Authorization", "Bearer s3cret-key"}});
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->status, 200) << ok->body;
    auto big = PostJson(path, {{"input", std::string(8192, 'a')}},
                        {{"Authorization", "Bearer s3cret-key"}});
    ASSERT_TRUE(big);
    EXPECT_EQ(big->status, 413) << big->body;
  }
}

}  // namespace
}  // namespace anymoe::testing
