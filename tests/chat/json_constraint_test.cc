// Constrained decoding driven by a random "model" (uniform over the allowed
// tokens, seeded) on real tokenizers: for each of the 200 schemas of
// tests/golden/chat/json_schemas.json (tools/gen_json_schemas.py) and every
// budget tried, a step never runs out of allowed tokens, the document is
// complete when the budget ends, and it parses. tools/check_json_outputs.py
// validates real models' outputs with Python's jsonschema.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <random>
#include <sstream>

#include "chat/json_constraint.h"
#include "formats/gguf.h"
#include "tokenizer/tokenizer.h"

namespace anymoe {
namespace {

using Json = nlohmann::ordered_json;

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Walk {
  std::string text;
  bool ended = false;
  std::string error;
};

// Samples uniformly among allowed tokens until the document completes or the
// budget is spent; end tokens end it when allowed (with probability 1/2).
Walk RandomWalk(const std::shared_ptr<JsonConstraint>& c, int64_t budget, uint64_t seed) {
  JsonConstraintState state(c);
  std::mt19937_64 rng(seed);
  Walk w;
  for (int64_t step = 0; step < budget; ++step) {
    const auto mask = state.Allowed(budget - step);
    std::vector<int32_t> allowed;
    for (size_t i = 0; i < mask->bits.size() * 64 && i < size_t(c->vocab().vocab_size()); ++i) {
      if (mask->bits[i >> 6] >> (i & 63) & 1) allowed.push_back(int32_t(i));
    }
    if (allowed.empty()) {
      w.error = "no allowed token at step " + std::to_string(step) + " after '" + w.text + "'";
      return w;
    }
    int32_t id = allowed[rng() % allowed.size()];
    const auto& ends = c->end_tokens();
    if (state.CanEnd() && !ends.empty() && rng() % 2 == 0) id = ends[0];
    const Status st = state.Accept(id);
    if (!st.ok()) {
      w.error = st.message();
      return w;
    }
    if (std::find(ends.begin(), ends.end(), id) != ends.end()) {
      w.ended = true;
      return w;
    }
    w.text += c->vocab().piece(id);
    if (state.IsComplete()) {
      w.ended = true;
      return w;
    }
  }
  w.ended = state.CanEnd();
  if (!w.ended) w.error = "budget spent before the document closed: '" + w.text + "'";
  return w;
}

// Every `stride`-th schema of a golden list, `walks_per_schema` walks each.
void CheckTokenizer(const Tokenizer& tok, int32_t eos, int64_t budget, int walks_per_schema,
                    const std::string& file = "json_schemas.json", size_t count = 200, size_t stride = 1) {
  auto vocab = VocabularyIndex::Build(tok);
  ASSERT_TRUE(vocab.ok()) << vocab.status().message();
  const Json schemas = Json::parse(Read(std::string(ANYMOE_GOLDEN_DIR) + "/chat/" + file));
  ASSERT_EQ(schemas.size(), count);
  int ok = 0;
  for (size_t i = 0; i < schemas.size(); i += stride) {
    auto c = JsonConstraint::Create(schemas[i], *vocab, {eos});
    ASSERT_TRUE(c.ok()) << i << ": " << c.status().message();
    for (int k = 0; k < walks_per_schema; ++k) {
      // Long shortest documents (nested models) get room past their shortest value.
      const int64_t shortest = (*c)->automaton().ShortestCompletion((*c)->automaton().Start());
      const Walk w = RandomWalk(*c, std::max(budget, shortest + 64), i * 100 + uint64_t(k));
      ASSERT_TRUE(w.error.empty()) << "schema " << i << ": " << w.error << "\n" << schemas[i].dump();
      ASSERT_TRUE(w.ended);
      const Json parsed = Json::parse(w.text, nullptr, false);
      ASSERT_FALSE(parsed.is_discarded()) << "schema " << i << ": " << w.text;
      ++ok;
    }
  }
  std::printf("%d random walks over %s: all closed and parsed\n", ok, file.c_str());
}

TEST(JsonConstraint, RandomWalksOnTheTinyByteTokenizer) {
  const std::string dir = std::string(ANYMOE_GOLDEN_DIR) + "/moe/glm_moe_dsa/";
  auto tok = Tokenizer::FromHfJson(dir + "tokenizer.json", dir + "tokenizer_config.json");
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  CheckTokenizer(**tok, (*tok)->eos_id(), 90, 3);
}

// Pydantic's schemas (ranges, patterns, formats, recursion, tagged unions):
// every third one, with budgets where the shortest completion decides.
TEST(JsonConstraint, RandomWalksOnThePydanticCorpus) {
  const std::string dir = std::string(ANYMOE_GOLDEN_DIR) + "/moe/glm_moe_dsa/";
  auto tok = Tokenizer::FromHfJson(dir + "tokenizer.json", dir + "tokenizer_config.json");
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  CheckTokenizer(**tok, (*tok)->eos_id(), 200, 2, "json_schemas_pydantic.json", 320, 3);
}

}  // namespace
}  // namespace anymoe

namespace anymoe {
namespace {

// SmolLM2's 49k-token vocabulary (the default model; `make test` fetches it).
TEST(JsonConstraint, RandomWalksOnSmolLm2) {
  const std::string path = std::string(ANYMOE_MODELS_DIR) + "/SmolLM2-135M-Instruct.Q4_1.gguf";
  auto gguf = GgufFile::Open(path);
  if (!gguf.ok()) GTEST_SKIP() << path << " not present (make model)";
  auto tok = Tokenizer::FromGguf(**gguf);
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  CheckTokenizer(**tok, (*tok)->eos_id(), 64, 1);
}

// A budget (max_tokens or the context) too small for the shortest document:
// the step fails with a named error instead of sampling from an empty mask
// (which picked an arbitrary token the constraint then refused).
TEST(JsonConstraint, NoRoomForTheDocumentIsANamedError) {
  const std::string dir = std::string(ANYMOE_GOLDEN_DIR) + "/moe/glm_moe_dsa/";
  auto tok = Tokenizer::FromHfJson(dir + "tokenizer.json", dir + "tokenizer_config.json");
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  auto vocab = VocabularyIndex::Build(**tok);
  ASSERT_TRUE(vocab.ok());
  const Json schema = Json::parse(
      R"({"type": "object", "properties": {"a_long_property_name": {"type": "string", "minLength": 20}},
          "required": ["a_long_property_name"]})");
  auto c = JsonConstraint::Create(schema, *vocab, {(*tok)->eos_id()});
  ASSERT_TRUE(c.ok()) << c.status().message();
  const int64_t shortest = (*c)->automaton().ShortestCompletion((*c)->automaton().Start());
  ASSERT_GT(shortest, 40);
  std::vector<float> logits(size_t((*tok)->vocab_size()), 0.0f);
  JsonConstraintState tight(*c);
  const Status st = tight.ApplyMask(logits, 10);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), "json_schema_no_room");
  EXPECT_EQ(st.kind(), ErrorKind::kInvalidArgument);
  EXPECT_NE(st.message().find(std::to_string(shortest)), std::string::npos) << st.message();
  JsonConstraintState roomy(*c);
  std::fill(logits.begin(), logits.end(), 0.0f);
  EXPECT_TRUE(roomy.ApplyMask(logits, shortest + 1).ok());
  EXPECT_GT(std::count(logits.begin(), logits.end(), 0.0f), 0);
}

TEST(JsonConstraint, UnsupportedKeywordsAreRefusedByName) {
  for (const char* kw : {"not", "if", "contains", "dependentSchemas", "unevaluatedProperties"}) {
    Json schema = Json::parse(R"({"type": "object", "properties": {"a": {"type": "string"}}})");
    schema["properties"]["a"][kw] = 1;
    auto c = CompileJsonSchema(schema);
    ASSERT_FALSE(c.ok()) << kw;
    EXPECT_EQ(c.status().message().rfind(std::string("keyword '") + kw + "' at /properties/a: ", 0), 0u)
        << c.status().message();
  }
  EXPECT_FALSE(CompileJsonSchema(Json::parse(R"({"$defs": {"n": {"$ref": "#/$defs/n"}}, "$ref": "#/$defs/n"})")).ok());
  EXPECT_FALSE(CompileJsonSchema(Json::parse(R"({"type": "string", "minLength": 5, "maxLength": 2})")).ok());
  EXPECT_FALSE(CompileJsonSchema(Json::parse(R"({"type": "object", "required": ["x"], "additionalProperties": false})")).ok());
}

TEST(JsonConstraint, AutomatonAcceptsExactlyTheSchemasDocuments) {
  auto c = CompileJsonSchema(Json::parse(R"({"type": "object", "properties": {
      "n": {"type": "integer"}, "s": {"type": "string", "maxLength": 2},
      "e": {"enum": ["ab", 1.5, null]}, "a": {"type": "array", "items": {"type": "boolean"}, "maxItems": 2}},
      "required": ["n", "a"], "additionalProperties": false})"));
  ASSERT_TRUE(c.ok()) << c.status().message();
  const JsonAutomaton automaton(*c);
  const auto accepts = [&](const std::string& text) {
    JsonState s = automaton.Start();
    for (char ch : text) {
      s = automaton.Advance(s, uint8_t(ch));
      if (s.empty()) return false;
    }
    return automaton.ShortestCompletion(s) == 0;
  };
  EXPECT_TRUE(accepts(R"({"n":-12,"a":[true, false]})"));
  EXPECT_TRUE(accepts(R"({"n": 0,"s":"é","e":1.5,"a":[]})"));
  EXPECT_TRUE(accepts(R"({"n":3, "e":null,"a":[false]})"));
  EXPECT_FALSE(accepts(R"({"a":[],"n":1})"));             // declared order
  EXPECT_FALSE(accepts(R"({"n":1})"));                    // a is required
  EXPECT_FALSE(accepts(R"({"n":01,"a":[]})"));            // leading zero
  EXPECT_FALSE(accepts(R"({"n":1.5,"a":[]})"));           // integer
  EXPECT_FALSE(accepts(R"({"n":1,"s":"abc","a":[]})"));   // maxLength
  EXPECT_FALSE(accepts(R"({"n":1,"e":"a","a":[]})"));     // enum
  EXPECT_FALSE(accepts(R"({"n":1,"a":[true,true,true]})"));  // maxItems
  EXPECT_FALSE(accepts(R"({"n":1,"x":2,"a":[]})"));       // no additional properties
  EXPECT_FALSE(accepts("{\"n\":1,\"s\":\"\x01\",\"a\":[]}"));  // raw control byte
  EXPECT_FALSE(accepts("{\"n\":1,\"s\":\"\xC3\",\"a\":[]}"));  // broken UTF-8
  EXPECT_EQ(automaton.ShortestCompletion(automaton.Start()), int64_t(std::string(R"({"n":0,"a":[]})").size()));
}

}  // namespace
}  // namespace anymoe

namespace anymoe {
namespace {

// Opt-in (--gtest_also_run_disabled_tests): the cost per decode step of the
// mask and the accept on SmolLM2's vocabulary, first pass (masks computed)
// and second pass (masks cached), over the random walks of the 200 schemas.
// Compare with a decode step (anymoe bench -p 0 -n 64 --parallel 1,8) to get
// the slowdown at batch 1 and 8 (each sequence of a batch applies its own mask).
TEST(JsonConstraintBench, DISABLED_MaskCostPerStepOnSmolLm2) {
  const std::string path = std::string(ANYMOE_MODELS_DIR) + "/SmolLM2-135M-Instruct.Q4_1.gguf";
  auto gguf = GgufFile::Open(path);
  if (!gguf.ok()) GTEST_SKIP() << path << " not present (make model)";
  auto tok = Tokenizer::FromGguf(**gguf);
  ASSERT_TRUE(tok.ok());
  auto vocab = VocabularyIndex::Build(**tok);
  ASSERT_TRUE(vocab.ok());
  const Json schemas = Json::parse(Read(std::string(ANYMOE_GOLDEN_DIR) + "/chat/json_schemas.json"));
  std::vector<float> logits(size_t((*tok)->vocab_size()), 0.0f);
  for (int pass = 0; pass < 2; ++pass) {
    double seconds = 0;
    int64_t steps = 0;
    std::vector<double> per_step;
    for (size_t i = 0; i < schemas.size(); ++i) {
      static std::vector<std::shared_ptr<JsonConstraint>> constraints(schemas.size());
      if (!constraints[i]) constraints[i] = *JsonConstraint::Create(schemas[i], *vocab, {(*tok)->eos_id()});
      const Walk w = RandomWalk(constraints[i], 64, i);  // the tokens a "model" picked
      JsonConstraintState state(constraints[i]);
      JsonState replay = constraints[i]->automaton().Start();
      std::string text;
      // Replay the walk's bytes token by token through ApplyMask + Accept.
      auto ids = (*tok)->Encode(w.text, false, false);
      for (size_t k = 0; k < ids.size(); ++k) {
        const auto start = std::chrono::steady_clock::now();
        Status st = state.ApplyMask(logits, int64_t(64 - k));
        if (st.ok()) st = state.Accept(ids[k]);
        const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (!st.ok()) break;  // a retokenised walk may take another path; stop there
        seconds += dt;
        per_step.push_back(dt);
        ++steps;
      }
    }
    std::sort(per_step.begin(), per_step.end());
    std::printf("pass %d (%s): %lld steps, mean %.1f us, p50 %.1f us, p99 %.1f us per step\n", pass + 1,
                pass == 0 ? "masks computed" : "masks cached", static_cast<long long>(steps),
                1e6 * seconds / double(steps), 1e6 * per_step[per_step.size() / 2],
                1e6 * per_step[per_step.size() * 99 / 100]);
  }
}

}  // namespace
}  // namespace anymoe
