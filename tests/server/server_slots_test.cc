// llama-server's GET /slots: one entry per parallel sequence, busy while a
// request generates (its decoded-token count moving), idle after; behind
// the API key; 501 when turned off (--no-slots).
#include <thread>

#include "server_fixture.h"

namespace anymoe::testing {
namespace {

using nlohmann::json;

class ServerSlots : public ServerTest {};

TEST_F(ServerSlots, ABusySlotCountsItsTokensAndIsFreedAfter) {
  ServerOptions o;
  o.debug_token_delay = std::chrono::milliseconds(40);
  SchedulerOptions sched;
  sched.max_parallel = 3;
  StartServer(o, sched);
  const auto slots = [this] {
    auto res = Client()->Get("/slots");
    EXPECT_TRUE(res);
    if (!res) return json();
    EXPECT_EQ(res->status, 200) << res->body;
    return ParseBody(res);
  };
  json idle = slots();
  ASSERT_EQ(idle.size(), 3u) << idle.dump();
  for (size_t i = 0; i < idle.size(); ++i) {
    EXPECT_EQ(idle[i]["id"], int(i));
    EXPECT_EQ(idle[i]["n_ctx"], context_);
    EXPECT_EQ(idle[i]["is_processing"], false);
    EXPECT_EQ(idle[i]["id_task"], -1);
  }
  std::thread request([this] {
    auto res = PostJson("/completion", {{"prompt", "Hello"}, {"n_predict", 24}, {"ignore_eos", true}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200) << res->body;
  });
  json busy;
  const bool seen = Eventually(
      [&] {
        busy = slots();
        return busy.is_array() && busy[0]["is_processing"] == true &&
               busy[0]["next_token"]["n_decoded"].get<int64_t>() >= 2;
      },
      std::chrono::seconds(10));
  EXPECT_TRUE(seen) << busy.dump();
  if (seen) {
    EXPECT_EQ(busy[0]["next_token"]["n_remain"].get<int64_t>(),
              24 - busy[0]["next_token"]["n_decoded"].get<int64_t>());
    EXPECT_GT(busy[0]["n_prompt_tokens"].get<int64_t>(), 0);
    EXPECT_EQ(busy[1]["is_processing"], false);
  }
  request.join();
  EXPECT_TRUE(Eventually([&] { return slots()[0]["is_processing"] == false; }));
}

TEST_F(ServerSlots, NeedTheKeyAndCanBeTurnedOff) {
  ServerOptions o;
  o.api_key = "secret";
  StartServer(o);
  auto no_key = Client()->Get("/slots");
  ASSERT_TRUE(no_key);
  EXPECT_EQ(no_key->status, 401);
  auto with_key = Client()->Get("/slots", {{"Authorization", "Bearer secret"}});
  ASSERT_TRUE(with_key);
  EXPECT_EQ(with_key->status, 200);
  EXPECT_EQ(ParseBody(with_key).size(), size_t(SchedulerOptions{}.max_parallel));
}

TEST_F(ServerSlots, OffIsA501) {
  ServerOptions o;
  o.slots_endpoint = false;
  StartServer(o);
  auto res = Client()->Get("/slots");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 501);
  EXPECT_EQ(ParseBody(res)["error"]["code"], "slots_disabled");
}

}  // namespace
}  // namespace anymoe::testing
