// llama-server's native API over real HTTP, with the request shapes its
// documentation (tools/server/README.md) shows: POST /completion with a
// string, token-id and mixed prompt, streamed and not, n_probs, stop words,
// samplers and response_fields; POST /infill on a model with FIM tokens (an
// editor-style request) and the named 400 on one without; the context
// overflow's n_prompt_tokens / n_ctx; bad bodies as 400s naming the field.
#include <filesystem>
#include <fstream>

#include "server_fixture.h"
#include "tokenizer/tokenizer.h"

namespace anymoe::testing {
namespace {

using nlohmann::json;

class ServerNative : public ServerTest {};

constexpr const char* kPrompt = "Building a website can be done in 10 simple steps:";

json Body(const httplib::Result& res) {
  EXPECT_TRUE(res);
  if (!res) return json();
  EXPECT_EQ(res->status, 200) << res->body;
  return ParseBody(res);
}

// llama_tiny with its last three tokens ("Ġattention", "'s", "))", the
// results of its last three merges) renamed into StarCoder's FIM tokens.
std::string FimModelFolder() {
  namespace fs = std::filesystem;
  const fs::path src = GoldenPath("llama_tiny");
  const fs::path out = fs::path(::testing::TempDir()) / "anymoe_native_fim_llama_tiny";
  fs::remove_all(out);
  fs::create_directories(out);
  for (const char* f : {"model.safetensors", "config.json", "tokenizer_config.json",
                        "generation_config.json"}) {
    fs::create_symlink(fs::absolute(src / f), out / f);
  }
  json tok = json::parse(std::ifstream(src / "tokenizer.json"));
  json& vocab = tok["model"]["vocab"];
  json& merges = tok["model"]["merges"];
  merges.erase(merges.end() - 3, merges.end());
  const std::pair<const char*, const char*> renamed[] = {
      {"\xC4\xA0" "attention", "<fim_prefix>"}, {"'s", "<fim_suffix>"}, {"))", "<fim_middle>"}};
  for (const auto& [old_text, fim] : renamed) {
    const int id = vocab[old_text].get<int>();
    vocab.erase(old_text);
    vocab[fim] = id;
    tok["added_tokens"].push_back({{"id", id},
                                   {"content", fim},
                                   {"single_word", false},
                                   {"lstrip", false},
                                   {"rstrip", false},
                                   {"normalized", false},
                                   {"special", true}});
  }
  std::ofstream(out / "tokenizer.json") << tok.dump();
  return out.string();
}

TEST_F(ServerNative, CompletionMatchesTheOpenAiRouteAndReportsItsFields) {
  StartServer();
  const Tokenizer& tok = engine_->tokenizer();
  const json body = Body(PostJson(
      "/completion",
      {{"prompt", kPrompt}, {"n_predict", 8}, {"temperature", 0}, {"return_tokens", true}}));
  ASSERT_TRUE(body.is_object());
  const std::vector<int32_t> ids = body["tokens"].get<std::vector<int32_t>>();
  EXPECT_EQ(body["stop"], true);
  EXPECT_EQ(body["tokens_predicted"], ids.size());
  EXPECT_EQ(body["tokens_evaluated"], engine_->Encode(kPrompt).size());
  EXPECT_EQ(body["timings"]["predicted_n"], ids.size());
  EXPECT_EQ(body["generation_settings"]["n_predict"], 8);
  EXPECT_EQ(body["model"], "llama_tiny");
  if (body["stop_type"] == "limit") {
    EXPECT_EQ(ids.size(), 8u);
    EXPECT_EQ(tok.Decode(ids), body["content"].get<std::string>());
  } else {
    EXPECT_EQ(body["stop_type"], "eos") << body.dump();
  }
  // The same generation as OpenAI's completions at temperature 0.
  const json oa = Body(PostJson("/v1/completions",
                                {{"prompt", kPrompt}, {"max_tokens", 8}, {"temperature", 0}}));
  EXPECT_EQ(oa["choices"][0]["text"], body["content"]);
  // /completions is llama-server's alias of /completion.
  const json alias = Body(PostJson(
      "/completions", {{"prompt", kPrompt}, {"n_predict", 8}, {"temperature", 0}}));
  EXPECT_EQ(alias["content"], body["content"]);
  EXPECT_EQ(alias["tokens"], json::array());  // without return_tokens
}

TEST_F(ServerNative, PromptAsTokenIdsAndMixed) {
  StartServer();
  const Tokenizer& tok = engine_->tokenizer();
  const std::vector<int32_t> ids = engine_->Encode(kPrompt);
  const json as_text =
      Body(PostJson("/completion", {{"prompt", kPrompt}, {"n_predict", 6}, {"temperature", 0}}));
  const json as_ids =
      Body(PostJson("/completion", {{"prompt", ids}, {"n_predict", 6}, {"temperature", 0}}));
  EXPECT_EQ(as_ids["content"], as_text["content"]);
  EXPECT_EQ(as_ids["tokens_evaluated"], ids.size());
  // [ids..., "text"]: the ids as given, then the text's tokens (no BOS inside).
  const std::vector<int32_t> head = tok.Encode("Building a", false, true);
  json mixed = json(head);
  mixed.push_back(" website");
  const json as_mixed =
      Body(PostJson("/completion", {{"prompt", mixed}, {"n_predict", 6}, {"temperature", 0}}));
  EXPECT_EQ(as_mixed["tokens_evaluated"], head.size() + tok.Encode(" website", false, true).size());
  EXPECT_EQ(as_mixed["prompt"], "Building a website");
  // A batch of one prompt, and llama-server's object form.
  const json batch = Body(
      PostJson("/completion", {{"prompt", json::array({ids})}, {"n_predict", 6}, {"temperature", 0}}));
  EXPECT_EQ(batch["content"], as_text["content"]);
  const json object = Body(PostJson(
      "/completion",
      {{"prompt", {{"prompt_string", kPrompt}}}, {"n_predict", 6}, {"temperature", 0}}));
  EXPECT_EQ(object["content"], as_text["content"]);
}

TEST_F(ServerNative, StreamAccumulatesToTheWholeAnswer) {
  StartServer();
  const json request = {{"prompt", kPrompt}, {"n_predict", 12}, {"temperature", 0},
                        {"return_tokens", true}, {"n_probs", 2}};
  const json whole = Body(PostJson("/completion", request));
  StreamResult s = Stream("/completion", request);
  ASSERT_EQ(s.status, 200) << s.body;
  EXPECT_FALSE(s.done) << "llama-server's native stream has no [DONE]";
  ASSERT_GE(s.events.size(), 2u);
  std::string content;
  std::vector<int32_t> ids;
  size_t probs = 0;
  for (size_t i = 0; i < s.events.size(); ++i) {
    const json& e = s.events[i];
    const bool last = i + 1 == s.events.size();
    EXPECT_EQ(e["stop"], last) << e.dump();
    content += e["content"].get<std::string>();
    for (const json& t : e["tokens"]) ids.push_back(t.get<int32_t>());
    if (!last) probs += e["completion_probabilities"].size();
  }
  EXPECT_EQ(content, whole["content"]);
  EXPECT_EQ(ids, whole["tokens"].get<std::vector<int32_t>>());
  EXPECT_EQ(probs, ids.size());
  const json& end = s.events.back();
  EXPECT_EQ(end["stop_type"], whole["stop_type"]);
  EXPECT_EQ(end["tokens_predicted"], whole["tokens_predicted"]);
  EXPECT_TRUE(end.contains("timings") && end.contains("generation_settings"));
}

TEST_F(ServerNative, ProbabilitiesStopWordsSamplersAndResponseFields) {
  StartServer();
  const json whole = Body(PostJson(
      "/completion",
      {{"prompt", kPrompt}, {"n_predict", 10}, {"temperature", 0}, {"n_probs", 3},
       {"return_tokens", true}}));
  const json& probs = whole["completion_probabilities"];
  ASSERT_EQ(probs.size(), whole["tokens"].size());
  for (size_t i = 0; i < probs.size(); ++i) {
    const json& p = probs[i];
    EXPECT_EQ(p["id"], whole["tokens"][i]);
    ASSERT_EQ(p["top_logprobs"].size(), 3u);
    // Greedy: the chosen token is the most likely one, and the list descends.
    EXPECT_EQ(p["top_logprobs"][0]["id"], p["id"]);
    EXPECT_GE(p["top_logprobs"][0]["logprob"].get<double>(),
              p["top_logprobs"][2]["logprob"].get<double>());
    EXPECT_LE(p["logprob"].get<double>(), 0.0);
    EXPECT_TRUE(p["bytes"].is_array());
  }
  // A stop word from the middle of the greedy text ends the content before it.
  const std::string text = whole["content"];
  ASSERT_GE(text.size(), 4u);
  // Two ASCII bytes (a stop string is text; half a character is not).
  size_t at = text.size() / 2;
  while (at + 2 < text.size() && (text[at] & 0x80 || text[at + 1] & 0x80)) ++at;
  ASSERT_LT(at + 2, text.size()) << text;
  const std::string word = text.substr(at, 2);
  const json stopped = Body(PostJson(
      "/completion",
      {{"prompt", kPrompt}, {"n_predict", 10}, {"temperature", 0}, {"stop", {word}}}));
  EXPECT_EQ(stopped["stop_type"], "word");
  EXPECT_EQ(stopped["stopping_word"], word);
  EXPECT_EQ(stopped["content"], text.substr(0, text.find(word)));
  // A sampler left out of `samplers` is not applied.
  const json chain = Body(PostJson(
      "/completion", {{"prompt", kPrompt}, {"n_predict", 2}, {"samplers", {"top_k"}},
                      {"top_p", 0.5}, {"min_p", 0.2}, {"seed", 7}}));
  EXPECT_EQ(chain["generation_settings"]["top_k"], 40);
  EXPECT_EQ(chain["generation_settings"]["top_p"], 1.0);
  EXPECT_EQ(chain["generation_settings"]["min_p"], 0.0);
  EXPECT_EQ(chain["generation_settings"]["temperature"], 1.0);
  EXPECT_EQ(chain["generation_settings"]["seed"], 7);
  // response_fields: only those, "a/b" lifted out of a.
  const json picked = Body(PostJson(
      "/completion", {{"prompt", kPrompt}, {"n_predict", 2},
                      {"response_fields", {"content", "generation_settings/n_predict", "nope"}}}));
  EXPECT_EQ(picked.size(), 2u) << picked.dump();
  EXPECT_TRUE(picked["content"].is_string());
  EXPECT_EQ(picked["n_predict"], 2);
}

TEST_F(ServerNative, JsonSchemaConstrainsTheCompletion) {
  StartServer({}, {}, true, Glm5Folder());
  const json schema = json::parse(
      R"({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})");
  for (int seed = 1; seed <= 3; ++seed) {
    const json body = Body(PostJson("/completion", {{"prompt", "JSON:"},
                                                    {"n_predict", 60},
                                                    {"json_schema", schema},
                                                    {"temperature", 1.0},
                                                    {"seed", seed}}));
    EXPECT_EQ(body["stop_type"], "eos") << body.dump();
    const json doc = json::parse(body["content"].get<std::string>(), nullptr, false);
    ASSERT_TRUE(doc.is_object()) << body["content"];
    EXPECT_TRUE(doc["n"].is_number_integer());
  }
  auto bad = PostJson("/completion",
                      {{"prompt", "x"}, {"json_schema", {{"type", "no-such-type"}}}});
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400) << bad->body;
  EXPECT_EQ(ParseBody(bad)["error"]["param"], "json_schema");
}

TEST_F(ServerNative, InfillUsesTheModelsFimTokens) {
  StartServer({}, {}, true, FimModelFolder());
  const Tokenizer& tok = engine_->tokenizer();
  ASSERT_GE(tok.FindToken("<fim_middle>"), 0);
  // The request an editor plugin (llama.vscode) sends.
  const json editor = {
      {"input_prefix", "def add(a, b):\n    "},
      {"input_suffix", "\n\nprint(add(1, 2))\n"},
      {"input_extra", {{{"filename", "util.py"}, {"text", "x = 1\n"}}}},
      {"prompt", ""},
      {"n_predict", 6},
      {"top_k", 40},
      {"top_p", 0.99},
      {"stream", false},
      {"n_indent", 4},
      {"samplers", {"top_k", "top_p", "infill"}},
      {"cache_prompt", true},
      {"t_max_prompt_ms", 500},
      {"t_max_predict_ms", 1000},
      {"response_fields", {"content", "prompt", "timings/prompt_n", "timings/predicted_n"}}};
  const json body = Body(PostJson("/infill", editor));
  ASSERT_TRUE(body.is_object());
  EXPECT_TRUE(body["content"].is_string());
  EXPECT_GE(body["predicted_n"].get<int>(), 1);
  // The documented layout without repository tokens: extra, PRE, prefix, SUF, suffix, MID.
  const std::string bos = tok.add_bos_default() ? std::string(tok.TokenPiece(tok.bos_id())) : "";
  EXPECT_EQ(body["prompt"], bos + "x = 1\n<fim_prefix>def add(a, b):\n    <fim_suffix>\n\nprint(add(1, 2))\n"
                                  "<fim_middle>");
  EXPECT_EQ(body["prompt_n"].get<size_t>(),
            tok.Encode(body["prompt"].get<std::string>(), false, true).size());
}

TEST_F(ServerNative, InfillWithoutFimTokensIsANamed400) {
  StartServer();
  auto res = PostJson("/infill", {{"input_prefix", "int main() {"}, {"input_suffix", "}"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400) << res->body;
  EXPECT_EQ(ParseBody(res)["error"]["code"], "fim_unsupported");
}

TEST_F(ServerNative, ContextOverflowCarriesLlamaServersFields) {
  SchedulerOptions sched;
  sched.context = 64;
  StartServer({}, sched);
  auto res = PostJson("/completion", {{"prompt", std::vector<int32_t>(100, 5)}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400) << res->body;
  const json e = ParseBody(res)["error"];
  EXPECT_EQ(e["code"], "context_length_exceeded");
  EXPECT_EQ(e["n_prompt_tokens"], 100);
  EXPECT_EQ(e["n_ctx"], 64);
  // The OpenAI routes carry the same fields.
  auto oa = PostJson("/v1/completions", {{"prompt", std::vector<int32_t>(100, 5)}});
  ASSERT_TRUE(oa);
  EXPECT_EQ(ParseBody(oa)["error"]["n_ctx"], 64);
}

TEST_F(ServerNative, BadBodiesAre400sNamingTheField) {
  StartServer();
  const int64_t vocab = engine_->model().config().vocab_size;
  const std::vector<std::pair<json, std::string>> cases = {
      {json::object(), "prompt"},
      {{{"prompt", 7}}, "prompt"},
      {{{"prompt", {{1, 2}, {3}}}}, "prompt"},
      {{{"prompt", {1, vocab}}}, "prompt"},
      {{{"prompt", {{"prompt_string", "x"}, {"multimodal_data", {"AAAA"}}}}}, "prompt"},
      {{{"prompt", "x"}, {"n_predict", "8"}}, "n_predict"},
      {{{"prompt", "x"}, {"n_predict", 0}}, "n_predict"},
      {{{"prompt", "x"}, {"n_probs", 99}}, "n_probs"},
      {{{"prompt", "x"}, {"mirostat", 2}}, "mirostat"},
      {{{"prompt", "x"}, {"typical_p", 0.5}}, "typical_p"},
      {{{"prompt", "x"}, {"grammar", "root ::= \"a"}}, "grammar"},
      {{{"prompt", "x"}, {"grammar", 7}}, "grammar"},
      {{{"prompt", "x"}, {"grammar", "root ::= \"a\""}, {"json_schema", json::object()}}, "grammar"},
      {{{"prompt", "x"}, {"samplers", {"nope"}}}, "samplers"},
      {{{"prompt", "x"}, {"logit_bias", {{1}}}}, "logit_bias"},
      {{{"prompt", "x"}, {"logit_bias", {{"hello", 1.0}}}}, "logit_bias"},
      {{{"prompt", "x"}, {"json_schema", "object"}}, "json_schema"},
      {{{"prompt", "x"}, {"response_fields", "content"}}, "response_fields"},
      {{{"prompt", "x"}, {"stop", {1}}}, "stop"},
      {{{"prompt", "x"}, {"return_tokens", "yes"}}, "return_tokens"},
      {{{"prompt", "x"}, {"repeat_penalty", -1}}, "repeat_penalty"},
  };
  for (const auto& [body, param] : cases) {
    SCOPED_TRACE(body.dump());
    auto res = PostJson("/completion", body);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400) << res->body;
    const json e = ParseBody(res)["error"];
    EXPECT_EQ(e["param"], param) << res->body;
    EXPECT_TRUE(e["code"].is_string()) << res->body;
  }
  auto infill = PostJson("/infill", {{"input_extra", {{{"filename", 3}}}}});
  ASSERT_TRUE(infill);
  EXPECT_EQ(infill->status, 400);
  EXPECT_EQ(ParseBody(infill)["error"]["param"], "input_extra.filename");
  auto not_json = Post("/completion", "{\"prompt\": ");
  ASSERT_TRUE(not_json);
  EXPECT_EQ(not_json->status, 400);
}

TEST_F(ServerNative, NativeRoutesNeedTheKey) {
  ServerOptions o;
  o.api_key = "secret";
  StartServer(o);
  for (const char* path : {"/completion", "/completions", "/infill", "/chat/completions"}) {
    auto res = PostJson(path, {{"prompt", "x"}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 401) << path;
  }
  auto ok = PostJson("/completion", {{"prompt", "x"}, {"n_predict", 1}},
                     {{"Authorization", "Bearer secret"}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  auto models = Client()->Get("/models", {{"Authorization", "Bearer secret"}});
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 200);
  EXPECT_EQ(ParseBody(models)["object"], "list");
}

}  // namespace
}  // namespace anymoe::testing
