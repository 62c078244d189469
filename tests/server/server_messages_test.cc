// Anthropic /v1/messages and OpenAI /v1/responses over real HTTP on the tiny
// GLM-5 golden: the same conversation through chat completions, messages and
// responses at temperature 0 gives the same tokens; a stream's events
// accumulate to the non-streamed body; count_tokens equals the chat prompt;
// malformed bodies get the API's error shape and a 4xx.
#include "server_fixture.h"

namespace anymoe::testing {
namespace {

using nlohmann::json;

class ServerMessages : public ServerTest {};

// The named SSE events of a stream body: (event, data).
std::vector<std::pair<std::string, json>> Events(const std::string& body) {
  std::vector<std::pair<std::string, json>> out;
  size_t at = 0;
  while ((at = body.find("event: ", at)) != std::string::npos) {
    const size_t eol = body.find('\n', at);
    const size_t data = body.find("data: ", eol);
    const size_t end = body.find("\n\n", data);
    out.emplace_back(body.substr(at + 7, eol - at - 7),
                     json::parse(body.substr(data + 6, end - data - 6)));
    at = end;
  }
  return out;
}

std::string Strip(std::string s) {
  s.erase(0, s.find_first_not_of(" \t\r\n"));
  return s;
}

TEST_F(ServerMessages, SameTokensThroughChatMessagesAndResponses) {
  StartServer({}, {}, true, Glm5Folder());
  auto chat = PostJson("/v1/chat/completions",
                       {{"messages", {{{"role", "user"}, {"content", "Hello"}}}},
                        {"chat_template_kwargs", {{"enable_thinking", false}}},
                        {"max_tokens", 12},
                        {"temperature", 0}});
  auto msg = PostJson("/v1/messages", {{"messages", {{{"role", "user"}, {"content", "Hello"}}}},
                                       {"thinking", {{"type", "disabled"}}},
                                       {"max_tokens", 12},
                                       {"temperature", 0}});
  auto resp = PostJson("/v1/responses", {{"input", "Hello"},
                                         {"reasoning", {{"effort", "none"}}},
                                         {"max_output_tokens", 12},
                                         {"temperature", 0}});
  ASSERT_TRUE(chat && msg && resp);
  ASSERT_EQ(chat->status, 200) << chat->body;
  ASSERT_EQ(msg->status, 200) << msg->body;
  ASSERT_EQ(resp->status, 200) << resp->body;
  const json c = ParseBody(chat), m = ParseBody(msg), r = ParseBody(resp);
  const std::string text = Strip(c["choices"][0]["message"]["content"].get<std::string>());
  ASSERT_FALSE(text.empty());
  ASSERT_EQ(m["content"].size(), 1u) << m.dump();
  EXPECT_EQ(m["content"][0]["type"], "text");
  EXPECT_EQ(Strip(m["content"][0]["text"].get<std::string>()), text);
  EXPECT_EQ(m["stop_reason"], "max_tokens");
  EXPECT_EQ(m["usage"]["output_tokens"], 12);
  const int64_t prompt = c["usage"]["prompt_tokens"];
  EXPECT_EQ(m["usage"]["input_tokens"].get<int64_t>() +
                m["usage"]["cache_read_input_tokens"].get<int64_t>(),
            prompt);
  EXPECT_EQ(r["status"], "incomplete");
  EXPECT_EQ(r["usage"]["input_tokens"], prompt);
  EXPECT_EQ(r["usage"]["output_tokens"], 12);
  ASSERT_EQ(r["output"].size(), 1u) << r.dump();
  EXPECT_EQ(Strip(r["output"][0]["content"][0]["text"].get<std::string>()), text);

  auto count = PostJson("/v1/messages/count_tokens",
                        {{"messages", {{{"role", "user"}, {"content", "Hello"}}}},
                         {"thinking", {{"type", "disabled"}}}});
  ASSERT_TRUE(count);
  EXPECT_EQ(ParseBody(count)["input_tokens"], prompt);
}

// A forced tool_use streamed: message_start, block start/delta/stop with
// contiguous indices, message_delta, message_stop; the deltas rebuild the
// non-streamed content.
TEST_F(ServerMessages, StreamAccumulatesToTheBody) {
  StartServer({}, {}, true, Glm5Folder());
  json req = {{"messages", {{{"role", "user"}, {"content", "Weather?"}}}},
              {"tools", {{{"name", "get_weather"},
                          {"input_schema",
                           {{"type", "object"},
                            {"properties", {{"city", {{"type", "string"}}}}},
                            {"required", {"city"}}}}}}},
              {"tool_choice", {{"type", "tool"}, {"name", "get_weather"}}},
              {"max_tokens", 60},
              {"temperature", 0}};
  auto whole = PostJson("/v1/messages", req);
  ASSERT_TRUE(whole);
  ASSERT_EQ(whole->status, 200) << whole->body;
  const json body = ParseBody(whole);
  EXPECT_EQ(body["stop_reason"], "tool_use");
  ASSERT_EQ(body["content"].size(), 1u);
  EXPECT_EQ(body["content"][0]["type"], "tool_use");
  EXPECT_TRUE(body["content"][0]["input"]["city"].is_string());

  req["stream"] = true;
  auto streamed = PostJson("/v1/messages", req);
  ASSERT_TRUE(streamed);
  const auto events = Events(streamed->body);
  ASSERT_GE(events.size(), 5u);
  EXPECT_EQ(events.front().first, "message_start");
  EXPECT_EQ(events.back().first, "message_stop");
  json content = json::array();
  std::string input;
  for (const auto& [name, data] : events) {
    EXPECT_EQ(data["type"], name);
    if (name == "content_block_start") {
      EXPECT_EQ(data["index"], content.size());
      content.push_back(data["content_block"]);
    } else if (name == "content_block_delta") {
      EXPECT_EQ(data["index"], content.size() - 1);
      input += data["delta"]["partial_json"].get<std::string>();
    } else if (name == "message_delta") {
      EXPECT_EQ(data["delta"]["stop_reason"], "tool_use");
    }
  }
  ASSERT_EQ(content.size(), 1u);
  EXPECT_EQ(content[0]["name"], "get_weather");
  EXPECT_EQ(json::parse(input), body["content"][0]["input"]);
}

TEST_F(ServerMessages, MalformedBodiesGetTheApiErrorShape) {
  StartServer({}, {}, true, Glm5Folder());
  const std::vector<std::string> bad_messages = {
      "{",
      "[]",
      R"({"messages": [{"role": "user", "content": "hi"}]})",  // no max_tokens
      R"({"max_tokens": 8, "messages": []})",
      R"({"max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "image"}]}]})",
      R"({"max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "tool_result",
          "tool_use_id": "toolu_unknown", "content": "x"}]}]})",
      R"({"max_tokens": 8, "messages": [{"role": "system", "content": "x"}]})",
      R"({"max_tokens": 8, "temperature": 3, "messages": [{"role": "user", "content": "x"}]})",
      R"({"max_tokens": 8, "tools": [{"name": "f", "input_schema": {"type": "object"}}],
          "tool_choice": {"type": "tool", "name": "g"}, "messages": [{"role": "user", "content": "x"}]})",
      R"({"max_tokens": 8, "tools": [{"name": "f", "input_schema": {"type": "nope"}}],
          "tool_choice": {"type": "any"}, "messages": [{"role": "user", "content": "x"}]})",
      R"({"max_tokens": 8, "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]})",
  };
  for (const std::string& b : bad_messages) {
    auto res = Post("/v1/messages", b);
    ASSERT_TRUE(res);
    EXPECT_GE(res->status, 400) << b;
    EXPECT_LT(res->status, 500) << b << " -> " << res->body;
    const json e = ParseBody(res);
    EXPECT_EQ(e["type"], "error") << res->body;
    EXPECT_EQ(e["error"]["type"], "invalid_request_error") << res->body;
    EXPECT_TRUE(e["error"]["message"].is_string());
  }
  const std::vector<std::string> bad_responses = {
      "{",
      R"({"max_output_tokens": 8})",
      R"({"input": "x", "store": true})",
      R"({"input": "x", "previous_response_id": "resp_1"})",
      R"({"input": [{"type": "function_call_output", "call_id": "nope", "output": "x"}]})",
      R"({"input": [{"type": "image"}]})",
      R"({"input": "x", "text": {"format": {"type": "json_schema", "schema": 3}}})",
      R"({"input": "x", "tools": [{"type": "web_search"}]})",
  };
  for (const std::string& b : bad_responses) {
    auto res = Post("/v1/responses", b);
    ASSERT_TRUE(res);
    EXPECT_GE(res->status, 400) << b;
    EXPECT_LT(res->status, 500) << b << " -> " << res->body;
    EXPECT_TRUE(ParseBody(res)["error"]["message"].is_string()) << res->body;
  }
}

TEST_F(ServerMessages, XApiKeyIsCheckedAndRefusalsAreAnthropicShaped) {
  ServerOptions o;
  o.api_key = "secret";
  StartServer(o, {}, true, Glm5Folder());
  const std::string body =
      R"({"max_tokens": 2, "messages": [{"role": "user", "content": "x"}]})";
  auto wrong = Post("/v1/messages", body, {{"x-api-key", "nope"}, {"anthropic-version", "2023-06-01"}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  EXPECT_EQ(ParseBody(wrong)["error"]["type"], "authentication_error");
  EXPECT_EQ(ParseBody(wrong)["type"], "error");
  auto right = Post("/v1/messages", body, {{"x-api-key", "secret"}, {"anthropic-version", "2023-06-01"}});
  ASSERT_TRUE(right);
  EXPECT_EQ(right->status, 200) << right->body;
}

}  // namespace
}  // namespace anymoe::testing
