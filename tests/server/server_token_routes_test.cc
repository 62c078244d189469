// llama-server's debugging routes over real HTTP: /tokenize and /detokenize
// carry the served tokenizer's ids both ways (in llama-server's shapes),
// /apply-template answers the prompt chat completions would run, and /props
// describes the model; bad bodies are 400s naming the field.
#include "server_fixture.h"
#include "tokenizer/tokenizer.h"

namespace anymoe::testing {
namespace {

using nlohmann::json;

class ServerTokenRoutes : public ServerTest {};

// A 400 in the OpenAI error shape, with a code.
void Expect400(const httplib::Result& res) {
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400) << res->body;
  const json body = ParseBody(res);
  ASSERT_TRUE(body.contains("error")) << res->body;
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_TRUE(body["error"]["code"].is_string()) << res->body;
}

TEST_F(ServerTokenRoutes, TokenizeAndDetokenizeRoundTrip) {
  StartServer({}, {}, true, Glm5Folder());
  const Tokenizer& tok = engine_->tokenizer();
  for (const std::string text : {"Hello, world!", "  two  spaces\tand tab\n", "日本語 ✓ 🙂",
                                 "<|user|>hi"}) {
    SCOPED_TRACE(text);
    for (bool add_special : {false, true}) {
      auto res = PostJson("/tokenize", {{"content", text}, {"add_special", add_special}});
      ASSERT_TRUE(res);
      ASSERT_EQ(res->status, 200) << res->body;
      const std::vector<int32_t> ids = ParseBody(res)["tokens"].get<std::vector<int32_t>>();
      EXPECT_EQ(ids, tok.Encode(text, add_special, /*parse_special=*/true));
      auto back = PostJson("/detokenize", {{"tokens", ids}});
      ASSERT_TRUE(back);
      ASSERT_EQ(back->status, 200) << back->body;
      if (!add_special) {
        EXPECT_EQ(ParseBody(back)["content"], text);
      }
    }
    // With pieces: each id with its text, or its bytes where it is part of a character.
    auto res = PostJson("/tokenize", {{"content", text}, {"with_pieces", true}});
    ASSERT_TRUE(res);
    std::string joined;
    const json pieces = ParseBody(res);
    for (const json& t : pieces["tokens"]) {
      ASSERT_TRUE(t.contains("id"));
      if (t["piece"].is_string()) {
        joined += t["piece"].get<std::string>();
      } else {
        for (const json& b : t["piece"]) joined += char(b.get<int>());
      }
    }
    EXPECT_EQ(joined, text) << res->body;
  }
  // parse_special false: the special token's text is plain text.
  auto plain = PostJson("/tokenize", {{"content", "<|user|>"}, {"parse_special", false}});
  ASSERT_TRUE(plain);
  EXPECT_EQ(ParseBody(plain)["tokens"].get<std::vector<int32_t>>(),
            tok.Encode("<|user|>", false, /*parse_special=*/false));
}

TEST_F(ServerTokenRoutes, BadBodiesNameTheField) {
  StartServer({}, {}, true, Glm5Folder());
  const int64_t vocab = engine_->model().config().vocab_size;
  const std::vector<std::pair<std::string, json>> cases = {
      {"/tokenize", json::object()},
      {"/tokenize", {{"content", 7}}},
      {"/tokenize", {{"content", "x"}, {"add_special", "yes"}}},
      {"/detokenize", json::object()},
      {"/detokenize", {{"tokens", {1, -1}}}},
      {"/detokenize", {{"tokens", {1, vocab}}}},
      {"/detokenize", {{"tokens", {1.5}}}},
      {"/apply-template", {{"messages", "hi"}}},
      {"/apply-template",
       {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"add_generation_prompt", false}}},
  };
  for (const auto& [path, body] : cases) {
    SCOPED_TRACE(path + " " + body.dump());
    Expect400(PostJson(path, body));
  }
  Expect400(Post("/tokenize", "{\"content\":"));
}

// The prompt of /apply-template is the one a chat completion runs: its
// tokens are what /v1/messages/count_tokens counts for the same conversation.
TEST_F(ServerTokenRoutes, ApplyTemplateIsTheChatPrompt) {
  StartServer({}, {}, true, Glm5Folder());
  const json messages = {{{"role", "system"}, {"content", "Be brief."}},
                         {{"role", "user"}, {"content", "What is 2+2?"}}};
  auto res = PostJson("/apply-template", {{"messages", messages}});
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const std::string prompt = ParseBody(res)["prompt"];
  EXPECT_NE(prompt.find("What is 2+2?"), std::string::npos) << prompt;
  auto count = PostJson("/v1/messages/count_tokens",
                        {{"system", "Be brief."},
                         {"messages", {{{"role", "user"}, {"content", "What is 2+2?"}}}}});
  ASSERT_TRUE(count);
  ASSERT_EQ(count->status, 200) << count->body;
  auto tokens = PostJson("/tokenize", {{"content", prompt}});
  ASSERT_TRUE(tokens);
  EXPECT_EQ(ParseBody(tokens)["tokens"].size(), ParseBody(count)["input_tokens"].get<size_t>());
}

TEST_F(ServerTokenRoutes, PropsDescribeTheModel) {
  StartServer({}, {}, true, Glm5Folder());
  auto res = Client()->Get("/props");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json props = ParseBody(res);
  EXPECT_EQ(props["n_ctx"], context_);
  EXPECT_EQ(props["chat_template"], engine_->tokenizer().chat_template());
  EXPECT_EQ(props["default_generation_settings"]["n_ctx"], context_);
}

}  // namespace
}  // namespace anymoe::testing
