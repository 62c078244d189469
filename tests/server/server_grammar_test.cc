// llama-server's `grammar` (GBNF) over real HTTP: on POST /completion, chat
// completions and /v1/completions the output is a sentence of the grammar
// (labelled by a fresh byte-by-byte run of the C++ pushdown machine; the
// whole corpus on SmolLM2 is checked with Lark by tools/check_gbnf_outputs.py);
// bad grammars and conflicting constraints are 400s with the grammar's
// error code.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "chat/gbnf_grammar.h"
#include "chat/grammar_pushdown.h"
#include "server_fixture.h"

namespace anymoe::testing {
namespace {

using nlohmann::json;

class ServerGrammar : public ServerTest {};

std::string CorpusGrammar(const std::string& name) {
  std::ifstream in(GoldenPath("chat/gbnf/" + name), std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// "accept" when `text` is a sentence of `grammar`.
std::string Label(const std::string& grammar, const std::string& text) {
  auto g = ParseGbnf(grammar);
  if (!g.ok()) return "bad grammar: " + g.status().message();
  GrammarPushdown m(std::move(*g));
  auto state = m.Start();
  if (!state.ok()) return "limit";
  for (uint8_t b : text) {
    state = m.Advance(*state, b);
    if (!state.ok()) return "limit";
    if (state->dead()) return "reject";
  }
  return m.Accepting(*state) ? "accept" : "prefix";
}

const char* const kCorpus[] = {"arithmetic.gbnf", "json.gbnf",   "list.gbnf",   "tree.gbnf",
                               "unicode.gbnf",    "answer.gbnf", "repetition.gbnf", "csv.gbnf",
                               "anychar.gbnf",    "nullable.gbnf"};

// The tiny GLM-5 golden writes near-random tokens: the grammar alone makes
// the text, at temperature 1, within a budget close to the shortest sentence.
TEST_F(ServerGrammar, CompletionOutputsAreSentencesOfTheGrammar) {
  StartServer({}, {}, true, Glm5Folder());
  for (const char* name : kCorpus) {
    const std::string grammar = CorpusGrammar(name);
    for (int seed = 1; seed <= 2; ++seed) {
      SCOPED_TRACE(std::string(name) + " seed " + std::to_string(seed));
      auto res = PostJson("/completion", {{"prompt", "Text:"},
                                          {"grammar", grammar},
                                          {"n_predict", 40},
                                          {"temperature", 1.0},
                                          {"seed", seed}});
      ASSERT_TRUE(res);
      ASSERT_EQ(res->status, 200) << res->body;
      const json body = ParseBody(res);
      const std::string text = body["content"];
      EXPECT_EQ(Label(grammar, text), "accept") << json(text).dump();
      EXPECT_EQ(body["generation_settings"]["grammar"], grammar);
    }
  }
}

TEST_F(ServerGrammar, ChatAndCompletionsTakeAGrammarToo) {
  StartServer({}, {}, true, Glm5Folder());
  const std::string grammar = CorpusGrammar("answer.gbnf");
  auto chat = PostJson("/v1/chat/completions",
                       {{"messages", {{{"role", "user"}, {"content", "A, B, C or D?"}}}},
                        {"grammar", grammar},
                        {"max_tokens", 30},
                        {"temperature", 1.0},
                        {"seed", 3}});
  ASSERT_TRUE(chat);
  ASSERT_EQ(chat->status, 200) << chat->body;
  const json m = ParseBody(chat)["choices"][0]["message"];
  EXPECT_EQ(Label(grammar, m["content"].get<std::string>()), "accept") << m.dump();
  auto oa = PostJson("/v1/completions", {{"prompt", "Answer:"},
                                         {"grammar", grammar},
                                         {"max_tokens", 30},
                                         {"temperature", 1.0},
                                         {"seed", 4}});
  ASSERT_TRUE(oa);
  ASSERT_EQ(oa->status, 200) << oa->body;
  EXPECT_EQ(Label(grammar, ParseBody(oa)["choices"][0]["text"].get<std::string>()), "accept");
  // Streamed: the deltas join to a sentence as well.
  auto streamed = Post("/completion", json({{"prompt", "Answer:"},
                                            {"grammar", grammar},
                                            {"n_predict", 30},
                                            {"temperature", 1.0},
                                            {"seed", 5},
                                            {"stream", true}})
                                          .dump());
  ASSERT_TRUE(streamed);
  std::string joined;
  std::istringstream lines(streamed->body);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("data: ", 0) != 0) continue;
    const json ev = json::parse(line.substr(6), nullptr, false);
    if (ev.is_object() && ev.contains("content")) joined += ev["content"].get<std::string>();
  }
  EXPECT_EQ(Label(grammar, joined), "accept") << joined;
}

TEST_F(ServerGrammar, BadGrammarsAre400sWithTheirCode) {
  StartServer({}, {}, true, Glm5Folder());
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"root ::= \"abc", "grammar_parse_error"},
      {"root ::= item", "grammar_undefined_rule"},
      {"item ::= \"a\"", "grammar_missing_root"},
      {"root ::= root \"a\" | \"b\"", "grammar_left_recursion"},
      {"root ::= \"a\" root", "grammar_empty_language"},
      {"root ::= \"a\"{5000}", "grammar_too_large"},
  };
  for (const auto& [grammar, code] : cases) {
    SCOPED_TRACE(grammar);
    for (const char* path : {"/completion", "/v1/chat/completions"}) {
      json body = {{"grammar", grammar}, {"max_tokens", 8}, {"n_predict", 8}};
      if (std::string(path) == "/completion") {
        body["prompt"] = "x";
      } else {
        body["messages"] = {{{"role", "user"}, {"content", "x"}}};
      }
      auto res = PostJson(path, body);
      ASSERT_TRUE(res);
      EXPECT_EQ(res->status, 400) << res->body;
      const json e = ParseBody(res)["error"];
      EXPECT_EQ(e["code"], code) << res->body;
      EXPECT_EQ(e["param"], "grammar") << res->body;
    }
  }
  // The position of a syntax error is in the message.
  auto res = PostJson("/completion", {{"prompt", "x"}, {"grammar", "root ::= \"a\"\nx ::= [b"}});
  ASSERT_TRUE(res);
  EXPECT_NE(ParseBody(res)["error"]["message"].get<std::string>().find("2:"), std::string::npos)
      << res->body;
  // One constraint at a time.
  auto both = PostJson("/v1/chat/completions",
                       {{"messages", {{{"role", "user"}, {"content", "x"}}}},
                        {"grammar", "root ::= \"a\""},
                        {"response_format", {{"type", "json_object"}}}});
  ASSERT_TRUE(both);
  EXPECT_EQ(both->status, 400) << both->body;
  EXPECT_EQ(ParseBody(both)["error"]["code"], "grammar_and_json_schema");
  // A budget below the shortest sentence is refused by name.
  auto tight = PostJson("/completion",
                        {{"prompt", "x"}, {"grammar", "root ::= [0-9]{30}"}, {"n_predict", 4}});
  ASSERT_TRUE(tight);
  EXPECT_NE(tight->body.find("grammar_no_room"), std::string::npos) << tight->body;
}

// SmolLM2 (skipped when absent): a real 49k vocabulary, tokens that split
// code points; a subset of the corpus at temperature 0 and 1.
TEST_F(ServerGrammar, SmolLm2WritesSentencesOfTheCorpusGrammars) {
  const std::string path = std::string(ANYMOE_MODELS_DIR) + "/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not present (make model)";
  SchedulerOptions sched;
  sched.context = 1024;
  StartServer({}, sched, true, path);
  for (const char* name : {"arithmetic.gbnf", "json.gbnf", "unicode.gbnf", "csv.gbnf"}) {
    const std::string grammar = CorpusGrammar(name);
    for (double temp : {0.0, 1.0}) {
      SCOPED_TRACE(std::string(name) + " temperature " + std::to_string(temp));
      auto res = PostJson("/completion", {{"prompt", "Example:"},
                                          {"grammar", grammar},
                                          {"n_predict", 48},
                                          {"temperature", temp},
                                          {"seed", 7}});
      ASSERT_TRUE(res);
      ASSERT_EQ(res->status, 200) << res->body;
      const std::string text = ParseBody(res)["content"];
      EXPECT_EQ(Label(grammar, text), "accept") << json(text).dump();
    }
  }
}

}  // namespace
}  // namespace anymoe::testing
