// Agent features of /v1/chat/completions over real HTTP: prompts rendered by
// the model's own template (tools, tool results, reasoning fed back,
// chat_template_kwargs) equal transformers' ids; tool calls parsed from the
// model's syntax (scripted GLM-5 output) and forced by constrained decoding
// (tool_choice required / named, on the random-weight GLM-5 golden), whole
// and streamed; reasoning_content apart from content; response_format;
// n > 1, echo and logit_bias.
#include <fstream>
#include <regex>
#include <set>

#include "scripted_service.h"
#include "server_fixture.h"

namespace anymoe::testing {
namespace {

using nlohmann::json;

json Weather() {
  return json::parse(R"({"type": "function", "function": {"name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
    "days": {"type": "integer"}}, "required": ["city", "days"]}}})");
}
json Time() {
  return json::parse(R"({"type": "function", "function": {"name": "get_time",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string",
    "enum": ["utc", "local"]}}, "required": ["zone"]}}})");
}

// Calls reassembled from a stream's delta.tool_calls, and its reasoning / content.
struct Reassembled {
  json calls = json::array();
  std::string reasoning, content, finish;
};
Reassembled FromStream(const StreamResult& r) {
  Reassembled out;
  for (const json& e : r.events) {
    if (!e.contains("choices") || e["choices"].empty()) continue;
    const json& c = e["choices"][0];
    const json& d = c["delta"];
    if (d.contains("reasoning_content")) out.reasoning += d["reasoning_content"].get<std::string>();
    if (d.contains("content")) out.content += d["content"].get<std::string>();
    if (d.contains("tool_calls")) {
      for (const json& t : d["tool_calls"]) {
        const size_t i = t["index"];
        if (t.contains("id")) {
          // The first delta of a call: id and name, before any argument.
          EXPECT_EQ(i, out.calls.size());
          EXPECT_EQ(t["function"]["arguments"], "");
          out.calls.push_back({{"id", t["id"]},
                               {"type", "function"},
                               {"function", {{"name", t["function"]["name"]}, {"arguments", ""}}}});
        } else {
          EXPECT_FALSE(t["function"].contains("name"));
          EXPECT_LT(i, out.calls.size());
          if (i >= out.calls.size()) continue;
          out.calls[i]["function"]["arguments"] =
              out.calls[i]["function"]["arguments"].get<std::string>() +
              t["function"]["arguments"].get<std::string>();
        }
      }
    }
    if (!c["finish_reason"].is_null()) out.finish = c["finish_reason"];
  }
  return out;
}

// Calls without their ids (each request draws its own).
json WithoutIds(json calls) {
  for (json& c : calls) c.erase("id");
  return calls;
}

class ServerAgent : public ServerTest {};

// The server's prompt ids equal transformers' apply_chat_template for requests
// with tools, tool calls (arguments as JSON text), tool results,
// reasoning_content, chat_template_kwargs and reasoning_effort: the greedy
// continuation of the chat request equals that of /v1/completions given the
// golden ids, and the prompt token counts agree.
TEST_F(ServerAgent, PromptsEqualTransformersRendering) {
  StartServer({}, {}, true, Glm5Folder());
  // Ordered: the template renders tools in the client's key order.
  const nlohmann::ordered_json golden =
      nlohmann::ordered_json::parse(std::ifstream(GoldenPath("chat/server_chat_prompts.json")));
  ASSERT_EQ(golden.size(), 4u);
  // The generated tokens of one request, from its logprobs (chat or completions).
  auto tokens = [](const json& body) {
    std::vector<std::string> out;
    const json& lp = body["choices"][0]["logprobs"];
    if (lp.contains("content")) {
      for (const json& t : lp["content"]) out.push_back(t["token"]);
    } else {
      for (const json& t : lp["tokens"]) out.push_back(t);
    }
    return out;
  };
  for (const nlohmann::ordered_json& g : golden) {
    nlohmann::ordered_json req = g["request"];
    req["max_tokens"] = 6;
    req["temperature"] = 0;
    req["tool_choice"] = "none";  // random weights: plain text either way
    req["logprobs"] = true;
    auto chat = Post("/v1/chat/completions", req.dump());
    ASSERT_TRUE(chat);
    ASSERT_EQ(chat->status, 200) << chat->body;
    const json c = ParseBody(chat);
    EXPECT_EQ(c["usage"]["prompt_tokens"], g["ids"].size()) << g["request"].dump();
    auto plain = PostJson("/v1/completions", {{"prompt", json::parse(g["ids"].dump())}, {"max_tokens", 6},
                                              {"temperature", 0}, {"logprobs", 0}});
    ASSERT_TRUE(plain);
    ASSERT_EQ(plain->status, 200) << plain->body;
    const json p = ParseBody(plain);
    EXPECT_EQ(p["usage"]["prompt_tokens"], g["ids"].size());
    EXPECT_EQ(tokens(p), tokens(c));
    EXPECT_FALSE(tokens(c).empty());
  }
}

// tool_choice naming a function: the arguments are forced to its schema by
// constrained decoding; the stream's deltas reassemble the same call.
TEST_F(ServerAgent, NamedToolChoiceIsForcedAndStreamsTheSameCall) {
  StartServer({}, {}, true, Glm5Folder());
  json req = {{"messages", {{{"role", "user"}, {"content", "Weather?"}}}},
              {"tools", {Weather(), Time()}},
              {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}},
              {"max_tokens", 60},
              {"temperature", 0.8},
              {"seed", 11}};
  auto res = PostJson("/v1/chat/completions", req);
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json body = ParseBody(res);
  const json& choice = body["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  const json& calls = choice["message"]["tool_calls"];
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_TRUE(calls[0]["id"].get<std::string>().starts_with("call_"));
  EXPECT_EQ(calls[0]["type"], "function");
  EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
  const json args = json::parse(calls[0]["function"]["arguments"].get<std::string>());
  ASSERT_TRUE(args.is_object());
  EXPECT_TRUE(args["city"].is_string());
  EXPECT_TRUE(args["days"].is_number_integer());
  EXPECT_TRUE(choice["message"]["content"].is_null());

  const Reassembled s = FromStream(Stream("/v1/chat/completions", req));
  EXPECT_EQ(s.finish, "tool_calls");
  EXPECT_EQ(WithoutIds(s.calls), WithoutIds(calls));
}

// tool_choice required: one or more calls of the listed tools, whole and streamed.
TEST_F(ServerAgent, RequiredToolChoiceGivesCallsWholeAndStreamed) {
  StartServer({}, {}, true, Glm5Folder());
  for (int seed = 1; seed <= 3; ++seed) {
    json req = {{"messages", {{{"role", "user"}, {"content", "Weather and time?"}}}},
                {"tools", {Weather(), Time()}},
                {"tool_choice", "required"},
                {"max_tokens", 120},
                {"temperature", 1.0},
                {"seed", seed}};
    auto res = PostJson("/v1/chat/completions", req);
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    const json choice = ParseBody(res)["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "tool_calls");
    const json& calls = choice["message"]["tool_calls"];
    ASSERT_GE(calls.size(), 1u);
    for (const json& c : calls) {
      const std::string name = c["function"]["name"];
      EXPECT_TRUE(name == "get_weather" || name == "get_time") << name;
      const json args = json::parse(c["function"]["arguments"].get<std::string>());
      if (name == "get_time") {
        EXPECT_TRUE(args["zone"] == "utc" || args["zone"] == "local") << args.dump();
      } else {
        EXPECT_TRUE(args["days"].is_number_integer()) << args.dump();
      }
    }
    const Reassembled s = FromStream(Stream("/v1/chat/completions", req));
    EXPECT_EQ(WithoutIds(s.calls), WithoutIds(calls));
    EXPECT_EQ(s.finish, "tool_calls");
  }
}

// What a model writes after its generation prompt, and what the server must
// make of it: the model's template picks the dialect.
struct ScriptedCase {
  std::string golden, tmpl, script, reasoning, content;
};

class ServerToolDialects : public ServerTest,
                           public ::testing::WithParamInterface<ScriptedCase> {};

TEST_P(ServerToolDialects, ModelToolCallSyntaxBecomesToolCallsWholeAndStreamed) {
  const ScriptedCase& sc = GetParam();
  const std::string model = ModelWithTemplate(sc.golden, sc.tmpl);
  json req = {{"messages", {{{"role", "user"}, {"content", "Weather and time in Paris?"}}}},
              {"tools", {Weather(), Time()}}};
  for (size_t piece : {1, 3, 7, 1000}) {
    SCOPED_TRACE(sc.tmpl + " pieces of " + std::to_string(piece));
    StartServer({}, {}, /*ready=*/false, model);
    ScriptedService scripted(sc.script, piece);
    server_->SetReady({engine_, &scripted, context_});
    auto res = PostJson("/v1/chat/completions", req);
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    const json choice = ParseBody(res)["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "tool_calls");
    const json& m = choice["message"];
    if (sc.reasoning.empty()) {
      EXPECT_FALSE(m.contains("reasoning_content")) << m.dump();
    } else {
      EXPECT_EQ(m["reasoning_content"], sc.reasoning);
    }
    EXPECT_EQ(m["content"], sc.content);
    ASSERT_EQ(m["tool_calls"].size(), 2u) << m.dump();
    EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "get_weather");
    // "days" is typed integer by the schema, "city" string (GLM's raw values
    // are decoded by the schema; JSON dialects carry their own types).
    EXPECT_EQ(m["tool_calls"][0]["function"]["arguments"], R"({"city": "Paris", "days": 3})");
    EXPECT_EQ(m["tool_calls"][1]["function"]["name"], "get_time");
    EXPECT_EQ(m["tool_calls"][1]["function"]["arguments"], R"({"zone": "utc"})");
    EXPECT_NE(m["tool_calls"][0]["id"], m["tool_calls"][1]["id"]);

    const Reassembled s = FromStream(Stream("/v1/chat/completions", req));
    EXPECT_EQ(s.reasoning, sc.reasoning);
    EXPECT_EQ(s.content, m["content"].is_null() ? "" : m["content"].get<std::string>());
    EXPECT_EQ(WithoutIds(s.calls), WithoutIds(m["tool_calls"]));
    EXPECT_EQ(s.finish, "tool_calls");

    // tool_choice none: the same text is not parsed for calls.
    json none = req;
    none["tool_choice"] = "none";
    auto plain = PostJson("/v1/chat/completions", none);
    ASSERT_TRUE(plain);
    const json pm = ParseBody(plain)["choices"][0];
    EXPECT_EQ(pm["finish_reason"], "stop");
    EXPECT_FALSE(pm["message"].contains("tool_calls"));
    EXPECT_NE(pm["message"]["content"].get<std::string>().find("get_time"), std::string::npos);
    server_->Stop();
    TearDown();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Dialects, ServerToolDialects,
    ::testing::Values(
        // GLM-5: the prompt ends inside <think>; calls without newlines.
        ScriptedCase{"moe/glm_moe_dsa", "glm-5.2.jinja",
                     "The user wants weather.</think>Checking.<tool_call>get_weather"
                     "<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>days</arg_key>"
                     "<arg_value>3</arg_value></tool_call><tool_call>get_time<arg_key>zone"
                     "</arg_key><arg_value>utc</arg_value></tool_call>",
                     "The user wants weather.", "Checking."},
        // GLM-4.5: "<think>" written by the model, newlines inside calls.
        ScriptedCase{"moe/glm4_moe", "glm-4.5.jinja",
                     "\n<think>Need tools.</think>\nChecking.<tool_call>get_weather\n"
                     "<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days"
                     "</arg_key>\n<arg_value>3</arg_value>\n</tool_call>\n<tool_call>get_time\n"
                     "<arg_key>zone</arg_key>\n<arg_value>utc</arg_value>\n</tool_call>",
                     "Need tools.", "\nChecking."},
        // Qwen3: JSON inside <tool_call> tags.
        ScriptedCase{"moe/qwen3_moe", "qwen3.jinja",
                     "<think>\nNeed tools.\n</think>\n\nChecking.\n<tool_call>\n{\"name\": "
                     "\"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n"
                     "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": "
                     "{\"zone\": \"utc\"}}\n</tool_call>",
                     "\nNeed tools.\n", "\n\nChecking.\n"}));

TEST_F(ServerAgent, ResponseFormatJsonSchemaAndItsErrors) {
  StartServer({}, {}, true, Glm5Folder());
  const json schema = json::parse(R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 12}, "n": {"type": "integer"},
      "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3}},
      "required": ["name", "n", "tags"]})");
  for (int seed = 1; seed <= 4; ++seed) {
    auto res = PostJson(
        "/v1/chat/completions",
        {{"messages", {{{"role", "user"}, {"content", "JSON please"}}}},
         {"response_format",
          {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", schema}}}}},
         {"max_tokens", 80},
         {"temperature", 1.0},
         {"seed", seed}});
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    const json choice = ParseBody(res)["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "stop");
    const json doc = json::parse(choice["message"]["content"].get<std::string>());
    EXPECT_TRUE(doc["name"].is_string() && doc["name"].get<std::string>().size() <= 12 * 4);
    EXPECT_TRUE(doc["n"].is_number_integer());
    EXPECT_TRUE(doc["tags"].is_array() && doc["tags"].size() <= 3);
  }
  auto obj = PostJson("/v1/chat/completions",
                      {{"messages", {{{"role", "user"}, {"content", "JSON"}}}},
                       {"response_format", {{"type", "json_object"}}},
                       {"max_tokens", 40},
                       {"seed", 3}});
  ASSERT_TRUE(obj);
  ASSERT_EQ(obj->status, 200) << obj->body;
  EXPECT_TRUE(
      json::parse(ParseBody(obj)["choices"][0]["message"]["content"].get<std::string>()).is_object());

  auto bad = PostJson("/v1/chat/completions",
                      {{"messages", {{{"role", "user"}, {"content", "x"}}}},
                       {"response_format",
                        {{"type", "json_schema"},
                         {"json_schema",
                          {{"schema",
                            {{"type", "object"},
                             {"properties", {{"a", {{"type", "string"}, {"pattern", "(x)\\1"}}}}}}}}}}}});
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  const json e = ParseBody(bad)["error"];
  EXPECT_EQ(e["param"], "response_format.json_schema.schema");
  EXPECT_EQ(e["code"], "unsupported_schema");
  EXPECT_EQ(e["message"].get<std::string>().rfind("keyword 'pattern' at /properties/a: back-references", 0), 0u)
      << e.dump();

  json tool = Weather();
  tool["function"]["parameters"]["properties"]["city"]["not"] = {{"const", "x"}};
  auto bad_tool = PostJson("/v1/chat/completions",
                           {{"messages", {{{"role", "user"}, {"content", "x"}}}},
                            {"tools", {tool}},
                            {"tool_choice", "required"}});
  ASSERT_TRUE(bad_tool);
  EXPECT_EQ(bad_tool->status, 400);
  EXPECT_EQ(ParseBody(bad_tool)["error"]["param"], "tools");
  EXPECT_NE(ParseBody(bad_tool)["error"]["message"].get<std::string>().find("keyword 'not' at "),
            std::string::npos);
}

TEST_F(ServerAgent, BadAgentFieldsName) {
  StartServer({}, {}, true, Glm5Folder());
  const json msgs = {{{"role", "user"}, {"content", "x"}}};
  struct Case {
    json extra;
    std::string param;
  };
  const std::vector<Case> cases = {
      {{{"tools", "x"}}, "tools"},
      {{{"tools", {{{"type", "function"}}}}}, "tools[0].function"},
      {{{"tool_choice", "sometimes"}}, "tool_choice"},
      {{{"tools", {Weather()}}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}},
       "tool_choice"},
      {{{"tool_choice", "required"}}, "tool_choice"},
      {{{"chat_template_kwargs", 3}}, "chat_template_kwargs"},
      {{{"reasoning_effort", 3}}, "reasoning_effort"},
      {{{"response_format", {{"type", "yaml"}}}}, "response_format.type"},
      {{{"n", 0}}, "n"},
      {{{"n", 17}}, "n"},
      {{{"logit_bias", {{"x", 1}}}}, "logit_bias"},
      {{{"logit_bias", {{"5", 101}}}}, "logit_bias"},
      {{{"logit_bias", {{"99999", 1}}}}, "logit_bias"},
  };
  for (const Case& c : cases) {
    json req = c.extra;
    req["messages"] = msgs;
    auto res = PostJson("/v1/chat/completions", req);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400) << c.extra.dump();
    EXPECT_EQ(ParseBody(res)["error"]["param"], c.param) << res->body;
  }
  json calls = {{{"role", "user"}, {"content", "x"}},
                {{"role", "assistant"},
                 {"tool_calls", {{{"type", "function"}, {"function", {{"name", "f"}, {"arguments", "[1]"}}}}}}}};
  auto res = PostJson("/v1/chat/completions", {{"messages", calls}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(ParseBody(res)["error"]["param"], "messages[1].tool_calls[0].function.arguments");
}

// Reasoning on (GLM-5's default) goes to reasoning_content; off, all is content.
TEST_F(ServerAgent, EnableThinkingReachesTheTemplate) {
  StartServer({}, {}, true, Glm5Folder());
  json req = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
              {"max_tokens", 8},
              {"temperature", 0},
              {"ignore_eos", true}};
  auto on = PostJson("/v1/chat/completions", req);
  req["chat_template_kwargs"] = {{"enable_thinking", false}};
  auto off = PostJson("/v1/chat/completions", req);
  ASSERT_TRUE(on && off);
  const json m_on = ParseBody(on)["choices"][0]["message"];
  const json m_off = ParseBody(off)["choices"][0]["message"];
  // The prompt ends inside <think> with thinking on: the text is reasoning.
  EXPECT_FALSE(m_on["reasoning_content"].get<std::string>().empty()) << m_on.dump();
  EXPECT_FALSE(m_off.contains("reasoning_content")) << m_off.dump();
  EXPECT_NE(ParseBody(on)["usage"]["prompt_tokens"], ParseBody(off)["usage"]["prompt_tokens"]);
}

TEST_F(ServerAgent, SeveralChoicesEchoAndLogitBias) {
  StartServer();
  // n = 3 greedy: three identical choices, usage counts all three.
  auto res = PostJson("/v1/completions",
                      {{"prompt", "Once upon"}, {"max_tokens", 5}, {"temperature", 0}, {"n", 3},
                       {"ignore_eos", true}});
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  json body = ParseBody(res);
  ASSERT_EQ(body["choices"].size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(body["choices"][i]["index"], i);
    EXPECT_EQ(body["choices"][i]["text"], body["choices"][0]["text"]);
  }
  EXPECT_EQ(body["usage"]["completion_tokens"], 15);
  const std::string greedy = body["choices"][0]["text"];

  // Sampled with one seed: the choices differ (seeds seed, seed + 1, ...) and
  // a second request repeats them.
  const json sampled = {{"prompt", "Once upon"}, {"max_tokens", 12}, {"temperature", 1.0},
                        {"n", 4}, {"seed", 9}, {"ignore_eos", true}};
  const json a = ParseBody(PostJson("/v1/completions", sampled));
  const json b = ParseBody(PostJson("/v1/completions", sampled));
  EXPECT_EQ(a["choices"], b["choices"]);
  std::set<std::string> texts;
  for (const json& c : a["choices"]) texts.insert(c["text"]);
  EXPECT_GT(texts.size(), 1u);

  // Streamed: every index streams and finishes; the texts equal the whole ones.
  const StreamResult s = Stream("/v1/completions", sampled);
  std::vector<std::string> streamed(4);
  int finished = 0;
  for (const json& e : s.events) {
    if (!e.contains("choices") || e["choices"].empty()) continue;
    const json& c = e["choices"][0];
    streamed[c["index"].get<size_t>()] += c["text"].get<std::string>();
    if (!c["finish_reason"].is_null()) ++finished;
  }
  EXPECT_EQ(finished, 4);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(streamed[i], a["choices"][i]["text"]);

  // Chat with n = 2.
  auto chat = PostJson("/v1/chat/completions",
                       {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 4},
                        {"n", 2}, {"temperature", 0}});
  ASSERT_TRUE(chat);
  ASSERT_EQ(chat->status, 200) << chat->body;
  EXPECT_EQ(ParseBody(chat)["choices"].size(), 2u);

  // echo: the prompt's text, then the same generated text.
  auto echo = PostJson("/v1/completions", {{"prompt", "Once upon"}, {"max_tokens", 5},
                                           {"temperature", 0}, {"echo", true}, {"ignore_eos", true}});
  ASSERT_TRUE(echo);
  EXPECT_EQ(ParseBody(echo)["choices"][0]["text"], "Once upon" + greedy);
  const StreamResult se = Stream("/v1/completions", {{"prompt", "Once upon"}, {"max_tokens", 5},
                                                     {"temperature", 0}, {"echo", true},
                                                     {"ignore_eos", true}});
  EXPECT_EQ(se.text, "Once upon" + greedy);

  // logit_bias +100 on one token: greedy picks it every step; -100 on the
  // greedy first token: something else comes first.
  const int32_t forced = 300;
  auto biased = PostJson("/v1/completions",
                         {{"prompt", "Once upon"}, {"max_tokens", 4}, {"temperature", 0},
                          {"logprobs", 0}, {"ignore_eos", true},
                          {"logit_bias", {{std::to_string(forced), 100}}}});
  ASSERT_TRUE(biased);
  ASSERT_EQ(biased->status, 200) << biased->body;
  const json toks = ParseBody(biased)["choices"][0]["logprobs"]["tokens"];
  ASSERT_EQ(toks.size(), 4u);
  for (const json& t : toks) {
    EXPECT_EQ(t, std::string(engine_->tokenizer().TokenPiece(forced)));
  }
  const std::vector<int32_t> prompt_ids = engine_->Encode("Once upon");
  auto plain = ParseBody(PostJson("/v1/completions",
                                  {{"prompt", prompt_ids}, {"max_tokens", 1}, {"temperature", 0},
                                   {"logprobs", 1}}));
  const std::string first = plain["choices"][0]["logprobs"]["tokens"][0];
  int32_t first_id = -1;
  for (int32_t id = 0; id < engine_->tokenizer().vocab_size(); ++id) {
    if (engine_->tokenizer().TokenPiece(id) == first) first_id = id;
  }
  ASSERT_GE(first_id, 0);
  auto banned = ParseBody(PostJson(
      "/v1/completions", {{"prompt", prompt_ids}, {"max_tokens", 1}, {"temperature", 0},
                          {"logprobs", 1}, {"logit_bias", {{std::to_string(first_id), -100}}}}));
  EXPECT_NE(banned["choices"][0]["logprobs"]["tokens"][0], first);
}

}  // namespace
}  // namespace anymoe::testing

namespace anymoe::testing {
namespace {

// SmolLM2 (the default model; skipped when absent): a real vocabulary of 49k
// tokens. A forced tool call and a json_schema reply parse and validate; the
// tool round trip (call, result, answer) renders with its own template.
TEST_F(ServerAgent, SmolLm2ForcedCallsAndSchemas) {
  const std::string path = std::string(ANYMOE_MODELS_DIR) + "/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not present (make model)";
  SchedulerOptions sched;
  sched.context = 2048;
  StartServer({}, sched, true, path);
  json req = {{"messages", {{{"role", "user"}, {"content", "What is the weather in Paris?"}}}},
              {"tools", {Weather(), Time()}},
              {"tool_choice", "required"},
              {"parallel_tool_calls", false},
              {"max_tokens", 60},
              {"temperature", 0}};
  auto res = PostJson("/v1/chat/completions", req);
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json m = ParseBody(res)["choices"][0]["message"];
  ASSERT_EQ(m["tool_calls"].size(), 1u) << m.dump();
  const json args = json::parse(m["tool_calls"][0]["function"]["arguments"].get<std::string>());
  EXPECT_TRUE(args.is_object());
  const Reassembled s = FromStream(Stream("/v1/chat/completions", req));
  EXPECT_EQ(WithoutIds(s.calls), WithoutIds(m["tool_calls"]));

  // The result goes back; the next reply is plain text.
  json round = {{"messages",
                 {{{"role", "user"}, {"content", "What is the weather in Paris?"}},
                  {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", m["tool_calls"]}},
                  {{"role", "tool"},
                   {"tool_call_id", m["tool_calls"][0]["id"]},
                   {"content", "{\"temp\": 21}"}}}},
                {"tools", {Weather(), Time()}},
                {"max_tokens", 12},
                {"temperature", 0}};
  auto next = PostJson("/v1/chat/completions", round);
  ASSERT_TRUE(next);
  ASSERT_EQ(next->status, 200) << next->body;
  EXPECT_TRUE(ParseBody(next)["choices"][0]["message"]["content"].is_string());

  const json schema = json::parse(R"({"type": "object", "properties": {
      "city": {"type": "string", "maxLength": 20}, "celsius": {"type": "number"},
      "sunny": {"type": "boolean"}}, "required": ["city", "celsius", "sunny"],
      "additionalProperties": false})");
  auto js = PostJson("/v1/chat/completions",
                     {{"messages", {{{"role", "user"}, {"content", "Weather in Paris as JSON"}}}},
                      {"response_format",
                       {{"type", "json_schema"}, {"json_schema", {{"name", "w"}, {"schema", schema}}}}},
                      {"max_tokens", 60},
                      {"temperature", 0}});
  ASSERT_TRUE(js);
  ASSERT_EQ(js->status, 200) << js->body;
  const json doc =
      json::parse(ParseBody(js)["choices"][0]["message"]["content"].get<std::string>());
  EXPECT_TRUE(doc["city"].is_string());
  EXPECT_TRUE(doc["celsius"].is_number());
  EXPECT_TRUE(doc["sunny"].is_boolean());
  EXPECT_EQ(doc.size(), 3u);
}

// One schema as Pydantic writes it (a range, a pattern, a format, a
// recursive model) through every entry point that takes a schema, on the
// random-weight GLM-5 golden (noise without the constraint).
TEST_F(ServerAgent, KeywordSchemaThroughEveryEntryPoint) {
  StartServer({}, {}, true, Glm5Folder());
  const json schema = json::parse(R"({"$defs": {"Node": {"type": "object", "properties": {
      "v": {"type": "integer", "minimum": 0, "maximum": 120},
      "kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}, "maxItems": 2}},
      "required": ["v"]}},
      "type": "object", "properties": {
      "code": {"type": "string", "pattern": "^[A-Z]{3}-\\d{3}$"},
      "day": {"type": "string", "format": "date"},
      "tree": {"$ref": "#/$defs/Node"}}, "required": ["code", "day", "tree"]})");
  const auto check = [](const std::string& text, const std::string& where) {
    const json doc = json::parse(text, nullptr, false);
    ASSERT_TRUE(doc.is_object()) << where << ": " << text;
    EXPECT_TRUE(std::regex_match(doc["code"].get<std::string>(), std::regex("[A-Z]{3}-[0-9]{3}"))) << where << text;
    EXPECT_TRUE(std::regex_match(doc["day"].get<std::string>(), std::regex("[0-9]{4}-[0-9]{2}-[0-9]{2}"))) << where;
    std::vector<json> nodes = {doc["tree"]};
    while (!nodes.empty()) {
      const json n = nodes.back();
      nodes.pop_back();
      ASSERT_TRUE(n["v"].is_number_integer()) << where << text;
      EXPECT_TRUE(n["v"].get<int64_t>() >= 0 && n["v"].get<int64_t>() <= 120) << where << text;
      if (n.contains("kids")) {
        EXPECT_LE(n["kids"].size(), 2u);
        for (const json& k : n["kids"]) nodes.push_back(k);
      }
    }
  };
  const json messages = {{{"role", "user"}, {"content", "JSON"}}};
  const json bodies[] = {
      {{"messages", messages},
       {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", schema}}}}}},
      {{"messages", messages}, {"json_schema", schema}},
  };
  for (int seed = 1; seed <= 2; ++seed) {
    for (const json& b : bodies) {
      json body = b;
      body["max_tokens"] = 160;
      body["temperature"] = 1.0;
      body["seed"] = seed;
      auto res = PostJson("/v1/chat/completions", body);
      ASSERT_TRUE(res);
      ASSERT_EQ(res->status, 200) << res->body;
      check(ParseBody(res)["choices"][0]["message"]["content"].get<std::string>(), body.contains("json_schema") ? "json_schema" : "response_format");
    }
    json tool = {{"type", "function"},
                 {"function", {{"name", "save"}, {"strict", true}, {"parameters", schema}}}};
    auto call = PostJson("/v1/chat/completions", {{"messages", messages}, {"tools", {tool}},
                                                  {"tool_choice", "required"}, {"max_tokens", 200},
                                                  {"temperature", 1.0}, {"seed", seed}});
    ASSERT_TRUE(call);
    ASSERT_EQ(call->status, 200) << call->body;
    check(ParseBody(call)["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>(),
          "tools");
    auto resp = PostJson("/v1/responses", {{"input", "JSON"}, {"max_output_tokens", 160}, {"temperature", 1.0},
                                           {"text", {{"format", {{"type", "json_schema"}, {"name", "x"},
                                                                 {"strict", true}, {"schema", schema}}}}}});
    ASSERT_TRUE(resp);
    ASSERT_EQ(resp->status, 200) << resp->body;
    check(ParseBody(resp)["output"][0]["content"][0]["text"].get<std::string>(), "text.format");
  }
  auto bad = PostJson("/v1/chat/completions", {{"messages", messages}, {"json_schema", {{"not", {}}}}});
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(ParseBody(bad)["error"]["param"], "json_schema");
}

}  // namespace
}  // namespace anymoe::testing
