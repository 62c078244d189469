// The real Mixtral-8x7B tokenizer and chat template behind the HTTP server
// (issue 47's real-file smoke): a tiny random-weight Mixtral GGUF carrying them
// (tests/golden/moe_gguf/mixtral_real_vocab.gguf) answers /tokenize and
// /detokenize with HF tokenizers' ids (tests/golden/tokenizer/mixtral.golden.json;
// the GGUF holds llama.cpp's pipeline, the legacy tokenizer.json's), renders
// conversations as jinja2 does, and runs chat completions end to end. The
// weights are random: only the tokenizer and template path is checked.
#include "server_fixture.h"
#include "tokenizer/tokenizer.h"

namespace anymoe::testing {
namespace {

using nlohmann::json;

class ServerSentencePiece : public ServerTest {
 protected:
  void SetUp() override {
    ServerTest::SetUp();
    StartServer({}, {}, true, GoldenPath("moe_gguf/mixtral_real_vocab.gguf"));
  }
  static const json& Golden() {
    static const json golden =
        json::parse(std::ifstream(GoldenPath("tokenizer/mixtral.golden.json")));
    return golden;
  }
  static const json& Corpus() {
    static const json corpus =
        json::parse(std::ifstream(GoldenPath("tokenizer/corpus_large.json")));
    return corpus;
  }
};

TEST_F(ServerSentencePiece, TokenizeAndDetokenizeGiveTheReferenceIds) {
  ASSERT_TRUE(engine_->tokenizer().is_sentencepiece());
  // Every 97th corpus string (every category is hit), each way.
  for (size_t i = 0; i < Corpus()["cases"].size(); i += 97) {
    const std::string text = Corpus()["cases"][i]["text"];
    const json& c = Golden()["cases"][i];
    SCOPED_TRACE(text);
    const std::vector<int32_t> want = c.value("legacy", c["ids"]).get<std::vector<int32_t>>();
    auto res = PostJson("/tokenize", {{"content", text}, {"add_special", false}});
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    const std::vector<int32_t> ids = ParseBody(res)["tokens"].get<std::vector<int32_t>>();
    EXPECT_EQ(ids, want);
    res = PostJson("/tokenize", {{"content", text}, {"add_special", true}});
    ASSERT_TRUE(res);
    std::vector<int32_t> with_bos = {1};
    with_bos.insert(with_bos.end(), want.begin(), want.end());
    EXPECT_EQ(ParseBody(res)["tokens"].get<std::vector<int32_t>>(), with_bos);
    auto back = PostJson("/detokenize", {{"tokens", ids}});
    ASSERT_TRUE(back);
    ASSERT_EQ(back->status, 200) << back->body;
    // HF's decode of these ids (the legacy pipeline's: the leading space the
    // encoder added is dropped again).
    EXPECT_EQ(ParseBody(back)["content"], c.value("legacy_decoded", text));
    // With pieces: each token's bytes ("▁" as a space, <0xNN> as its byte).
    res = PostJson("/tokenize", {{"content", text}, {"with_pieces", true}});
    ASSERT_TRUE(res);
    std::string joined;
    const json pieces = ParseBody(res);
    for (const json& t : pieces["tokens"]) {
      if (t["piece"].is_string()) {
        joined += t["piece"].get<std::string>();
      } else {
        for (const json& b : t["piece"]) joined += char(b.get<int>());
      }
    }
    std::string spaced = text.empty() ? "" : " " + text;  // a "▁" in the text reads as a space
    for (size_t at; (at = spaced.find("\u2581")) != std::string::npos;) spaced.replace(at, 3, " ");
    EXPECT_EQ(joined, spaced) << res->body;
  }
}

TEST_F(ServerSentencePiece, RealChatTemplateRendersAndRunsEndToEnd) {
  for (const json& chat : Golden()["chat"]) {
    SCOPED_TRACE(chat["prompt"].get<std::string>());
    auto res = PostJson("/apply-template", {{"messages", chat["messages"]}});
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    EXPECT_EQ(ParseBody(res)["prompt"], chat["prompt"]);
    res = PostJson("/tokenize", {{"content", chat["prompt"]}, {"add_special", false}});
    ASSERT_TRUE(res);
    const auto want = chat["legacy_ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(ParseBody(res)["tokens"].get<std::vector<int32_t>>(), want);
    res = PostJson("/v1/chat/completions",
                   {{"messages", chat["messages"]}, {"max_tokens", 4}, {"temperature", 0}});
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    const json body = ParseBody(res);
    // The rendered prompt's own <s>, no second BOS.
    EXPECT_EQ(body["usage"]["prompt_tokens"], want.size()) << res->body;
    EXPECT_EQ(body["usage"]["completion_tokens"], 4) << res->body;
    EXPECT_TRUE(body["choices"][0]["message"]["content"].is_string()) << res->body;
  }
}

}  // namespace
}  // namespace anymoe::testing
