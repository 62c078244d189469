// Prefix caching through the server: a second request sharing a prompt
// prefix prefills fewer tokens (the /metrics hit counter and
// usage.prompt_tokens_details.cached_tokens say how many) and gives the same
// greedy output as a server without the cache; a multi-turn chat reuses the
// previous reply's blocks; after the requests end no block stays in use.
#include "server_fixture.h"

namespace anymoe::testing {
namespace {

using nlohmann::json;

class ServerPrefixCache : public ServerTest {
 protected:
  // The value of an unlabelled metric.
  double Metric(const std::string& name) {
    auto res = Client()->Get("/metrics");
    EXPECT_TRUE(res);
    const std::string key = "\n" + name + " ";
    const size_t at = res->body.find(key);
    EXPECT_NE(at, std::string::npos) << name;
    if (at == std::string::npos) return -1;
    return std::stod(res->body.substr(at + key.size()));
  }
  json Complete(const json& prompt, int max_tokens = 8) {
    auto res = PostJson("/v1/completions", {{"prompt", prompt},
                                            {"max_tokens", max_tokens},
                                            {"temperature", 0},
                                            {"ignore_eos", true}});
    EXPECT_TRUE(res);
    EXPECT_EQ(res->status, 200) << res->body;
    return ParseBody(res);
  }
};

std::vector<int32_t> Ids(int n, int salt) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(int32_t(3 + (i * 37 + salt * 101) % 500));
  return ids;
}

TEST_F(ServerPrefixCache, SharedPrefixPrefillsLessAndGivesTheSameTokens) {
  // Without the cache: the reference outputs.
  SchedulerOptions off;
  off.prefix_cache = false;
  StartServer({}, off);
  const std::vector<int32_t> a = Ids(90, 1);
  std::vector<int32_t> b(a.begin(), a.begin() + 70);
  for (int32_t t : Ids(20, 2)) b.push_back(t);
  const json ref_a = Complete(a)["choices"][0]["text"];
  const json ref_b = Complete(b)["choices"][0]["text"];
  EXPECT_EQ(Metric("anymoe_prefix_cache_hits_total"), 0);
  TearDown();

  StartServer();
  const json first = Complete(a);
  EXPECT_EQ(first["choices"][0]["text"], ref_a);
  EXPECT_FALSE(first["usage"].contains("prompt_tokens_details"));
  EXPECT_EQ(Metric("anymoe_prefix_cache_hits_total"), 0);
  EXPECT_EQ(Metric("anymoe_prefix_cache_queries_total"), 90);

  // The same prompt: 5 full blocks of 16 (the last prompt token always runs).
  const json again = Complete(a);
  EXPECT_EQ(again["choices"][0]["text"], ref_a);
  EXPECT_EQ(again["usage"]["prompt_tokens"], 90);
  EXPECT_EQ(again["usage"]["prompt_tokens_details"]["cached_tokens"], 80);
  EXPECT_EQ(Metric("anymoe_prefix_cache_hits_total"), 80);

  // 70 tokens in common: 4 blocks.
  const json other = Complete(b);
  EXPECT_EQ(other["choices"][0]["text"], ref_b);
  EXPECT_EQ(other["usage"]["prompt_tokens_details"]["cached_tokens"], 64);
  EXPECT_EQ(Metric("anymoe_prefix_cache_hits_total"), 144);
  EXPECT_NEAR(Metric("anymoe_prefix_cache_hit_ratio"), 144.0 / 270.0, 1e-6);

  // Every block is free once the requests ended (cached ones stay
  // readable until evicted).
  EXPECT_TRUE(Eventually([&] { return Metric("anymoe_kv_cache_blocks_used") == 0; }));
  EXPECT_GE(Metric("anymoe_prefix_cache_blocks"), 5);
}

// A chat whose next turn holds the previous one: the shared system prompt
// and history come from the cache, outputs equal a server without it.
TEST_F(ServerPrefixCache, MultiTurnChatReusesItsHistory) {
  // Three turns on the tiny GLM-5 (MLA + DSA indexer keys in the cache) with
  // the GLM-5.2 template; each turn's prompt holds the previous reply.
  auto run = [&](bool cache) {
    SchedulerOptions o;
    o.prefix_cache = cache;
    StartServer({}, o, true, Glm5Folder());
    json messages = {{{"role", "system"}, {"content", std::string(200, 'x') + " be brief"}},
                     {{"role", "user"}, {"content", "first question"}}};
    std::vector<json> replies;
    for (int turn = 0; turn < 3; ++turn) {
      auto res = PostJson("/v1/chat/completions",
                          {{"messages", messages},
                           {"max_tokens", 20},
                           {"temperature", 0},
                           {"ignore_eos", true},
                           {"chat_template_kwargs", {{"enable_thinking", false}}}});
      EXPECT_TRUE(res);
      EXPECT_EQ(res->status, 200) << res->body;
      const json body = ParseBody(res);
      replies.push_back(body);
      messages.push_back(
          {{"role", "assistant"}, {"content", body["choices"][0]["message"]["content"]}});
      messages.push_back({{"role", "user"}, {"content", "question " + std::to_string(turn)}});
    }
    EXPECT_TRUE(Eventually([&] { return Metric("anymoe_kv_cache_blocks_used") == 0; }));
    TearDown();
    return replies;
  };
  const std::vector<json> without = run(false);
  const std::vector<json> with = run(true);
  for (size_t t = 0; t < 3; ++t) {
    EXPECT_EQ(with[t]["choices"][0]["message"], without[t]["choices"][0]["message"]) << t;
    EXPECT_EQ(with[t]["usage"]["prompt_tokens"], without[t]["usage"]["prompt_tokens"]);
    EXPECT_FALSE(without[t]["usage"].contains("prompt_tokens_details"));
  }
  // Turn 2 and 3 reuse at least the system prompt and the first turn.
  for (size_t t = 1; t < 3; ++t) {
    const int64_t cached = with[t]["usage"]["prompt_tokens_details"]["cached_tokens"];
    EXPECT_GE(cached, with[t - 1]["usage"]["prompt_tokens"].get<int64_t>() - 16) << t;
  }
}

}  // namespace
}  // namespace anymoe::testing
