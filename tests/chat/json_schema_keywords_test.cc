// The schema compiler and automaton on the keywords of issue 54, against
// tests/golden/chat/json_keyword_cases.json (validity decided by Python's
// jsonschema with format checking, tools/gen_json_schemas.py): the automaton
// never accepts an invalid text, and every valid text it refuses is one of
// the spellings it never generates (listed in NotGenerated), so on these
// cases it accepts exactly the valid texts of its output grammar.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "chat/json_automaton.h"
#include "chat/json_schema.h"
#include "testing/scaling.h"

namespace anymoe {
namespace {

using Json = nlohmann::ordered_json;

Json ReadGolden(const std::string& name) {
  std::ifstream in(std::string(ANYMOE_GOLDEN_DIR) + "/chat/" + name);
  return Json::parse(in);
}

bool Accepts(const JsonAutomaton& a, const std::string& text) {
  JsonState s = a.Start();
  for (char ch : text) {
    s = a.Advance(s, uint8_t(ch));
    if (s.empty()) return false;
  }
  return a.ShortestCompletion(s) == 0;
}

// Valid texts outside what the automaton generates (docs/chat.md): numbers
// spelled with an exponent, a fraction on an integer, or "-0", and ranged
// numbers past 9 whole digits (15 for integers) or 6 fraction digits; strings with
// escapes where a pattern or format drives the text; formats' leap days,
// leap seconds and forms outside the documented grammars; object keys out of
// the declared order.
size_t WholeDigits(const std::string& text) {
  const size_t start = text[0] == '-' ? 1 : 0;
  return text.find_first_not_of("0123456789", start) == std::string::npos ? text.size() - start
                                                                          : text.find_first_not_of("0123456789", start) - start;
}

bool NotGenerated(const Json& schema, const std::string& text) {
  const std::string type = schema.value("type", "");
  if (type == "integer" || type == "number") {
    return text.find_first_of("eE") != std::string::npos || text == "-0" ||
           (type == "integer" && text.find('.') != std::string::npos) || text.rfind("-0.", 0) == 0 ||
           text.find(".0") != std::string::npos || WholeDigits(text) > (type == "number" ? 9 : 15) ||
           (text.find('.') != std::string::npos && text.size() - text.find('.') - 1 > 6);
  }
  if (type == "string") {
    // Python's \w \d \s (what jsonschema runs) take Unicode letters and
    // digits, ECMA-262's only ASCII: the automaton generates the ASCII side.
    const bool non_ascii = std::any_of(text.begin(), text.end(), [](char c) { return uint8_t(c) >= 0x80; });
    return text.find('\\') != std::string::npos || schema.contains("format") || non_ascii;
  }
  if (schema.contains("minProperties") || schema.contains("maxProperties") || schema.contains("dependentRequired")) {
    return true;  // the listed properties are fixed as required or left out (docs/chat.md)
  }
  if (type == "object") {
    const Json v = Json::parse(text);
    std::string last;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (it.key() < last) return true;  // the cases' properties are declared in order
      last = it.key();
    }
  }
  return false;
}

TEST(JsonSchemaKeywords, AutomatonAcceptsWhatJsonschemaAccepts) {
  const Json all = ReadGolden("json_keyword_cases.json");
  int cases = 0, valid = 0, accepted = 0, not_generated = 0;
  for (const Json& e : all) {
    auto compiled = CompileJsonSchema(e["schema"]);
    ASSERT_TRUE(compiled.ok()) << e["schema"].dump() << ": " << compiled.status().message();
    const JsonAutomaton automaton(*compiled);
    for (const Json& c : e["cases"]) {
      const std::string text = c[0].get<std::string>();
      const bool ok = c[1].get<bool>();
      const bool accepts = Accepts(automaton, text);
      ++cases;
      valid += ok;
      accepted += accepts;
      EXPECT_FALSE(accepts && !ok) << e["schema"].dump() << " accepts the invalid " << text;
      if (ok && !accepts) {
        EXPECT_TRUE(NotGenerated(e["schema"], text)) << e["schema"].dump() << " refuses the valid " << text;
        ++not_generated;
      }
    }
  }
  std::printf("%d cases, %d valid, %d accepted, %d valid outside the generated grammar\n", cases, valid, accepted,
              not_generated);
  EXPECT_EQ(all.size(), 49u);
  EXPECT_GT(accepted, valid * 3 / 4);
}

std::string Refusal(const std::string& schema) {
  auto c = CompileJsonSchema(Json::parse(schema));
  return c.ok() ? "(compiled)" : c.status().message();
}

TEST(JsonSchemaKeywords, RefusalsNameKeywordPathAndReason) {
  EXPECT_EQ(Refusal(R"({"properties": {"a": {"not": {"type": "string"}}}})"),
            "keyword 'not' at /properties/a: negation cannot be compiled into the generating automaton");
  EXPECT_EQ(Refusal(R"({"properties": {"a": {"type": "string", "pattern": "(a)\\1"}}})").rfind(
                "keyword 'pattern' at /properties/a: back-references", 0),
            0u);
  EXPECT_EQ(Refusal(R"({"oneOf": [{"type": "integer"}, {"type": "number"}]})"),
            "keyword 'oneOf' at /: alternatives 0 and 1 may both match, so exactly-one cannot be enforced (use "
            "anyOf, or a discriminating const property)");
  EXPECT_NE(Refusal(R"({"type": "number", "multipleOf": 0.5})").find("keyword 'multipleOf' at /"), std::string::npos);
  EXPECT_NE(Refusal(R"({"type": "array", "uniqueItems": true})").find("keyword 'uniqueItems' at /"), std::string::npos);
  EXPECT_NE(Refusal(R"({"allOf": [{"type": "string"}, {"type": "integer"}]})").find("keyword 'allOf' at /"),
            std::string::npos);
  EXPECT_NE(Refusal(R"({"allOf": [{"pattern": "a"}, {"pattern": "b"}]})").find("keyword 'pattern' at /"),
            std::string::npos);
  EXPECT_NE(Refusal(R"({"$defs": {"n": {"$ref": "#/$defs/n"}}, "$ref": "#/$defs/n"})").find("keyword '$ref'"),
            std::string::npos);
  // A recursion every branch of which recurses again has no finite value.
  EXPECT_NE(Refusal(R"({"$defs": {"n": {"type": "object", "properties": {"c": {"$ref": "#/$defs/n"}},
                "required": ["c"]}}, "$ref": "#/$defs/n"})")
                .find("no finite value"),
            std::string::npos);
  EXPECT_NE(Refusal(R"({"type": "integer", "minimum": 1e300})").find("keyword 'minimum' at /"), std::string::npos);
}

TEST(JsonSchemaKeywords, RecursiveRefNestsUpToTheStack) {
  auto c = CompileJsonSchema(Json::parse(R"({"$defs": {"Node": {"type": "object", "properties": {
      "v": {"type": "integer", "minimum": 0, "maximum": 9},
      "kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}, "required": ["v"]}},
      "$ref": "#/$defs/Node"})"));
  ASSERT_TRUE(c.ok()) << c.status().message();
  const JsonAutomaton a(*c);
  EXPECT_TRUE(Accepts(a, R"({"v":1,"kids":[{"v":2},{"v":3,"kids":[]}]})"));
  EXPECT_FALSE(Accepts(a, R"({"v":10})"));
  // Each level takes two frames (object, array): 15 levels fit in 32 frames
  // with the innermost object, 17 do not, and no prefix ever dead-ends.
  std::string deep = R"({"v":0)";
  for (int i = 0; i < 15; ++i) deep += R"(,"kids":[{"v":0)";
  for (int i = 0; i < 15; ++i) deep += "}]";
  EXPECT_TRUE(Accepts(a, deep + "}"));
  std::string too_deep = R"({"v":0)";
  for (int i = 0; i < 17; ++i) too_deep += R"(,"kids":[{"v":0)";
  EXPECT_FALSE(Accepts(a, too_deep));
}

TEST(JsonSchemaKeywords, TaggedUnionWithDiscriminator) {
  auto c = CompileJsonSchema(Json::parse(R"({"$defs": {
      "Cat": {"type": "object", "properties": {"kind": {"const": "cat"}, "lives": {"type": "integer"}}, "required": ["kind"]},
      "Dog": {"type": "object", "properties": {"kind": {"const": "dog"}, "good": {"type": "boolean"}}, "required": ["kind"]}},
      "oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}],
      "discriminator": {"propertyName": "kind", "mapping": {"cat": "#/$defs/Cat", "dog": "#/$defs/Dog"}}})"));
  ASSERT_TRUE(c.ok()) << c.status().message();
  const JsonAutomaton a(*c);
  EXPECT_TRUE(Accepts(a, R"({"kind":"cat","lives":9})"));
  EXPECT_TRUE(Accepts(a, R"({"kind":"dog","good":true})"));
  EXPECT_FALSE(Accepts(a, R"({"kind":"dog","lives":9})"));
}

TEST(JsonSchemaKeywords, AllOfAroundARefMerges) {
  auto c = CompileJsonSchema(Json::parse(R"({"$defs": {"Age": {"type": "integer", "minimum": 0}},
      "type": "object", "properties": {"age": {"allOf": [{"$ref": "#/$defs/Age"}], "maximum": 120,
      "description": "years"}}, "required": ["age"]})"));
  ASSERT_TRUE(c.ok()) << c.status().message();
  const JsonAutomaton a(*c);
  EXPECT_TRUE(Accepts(a, R"({"age":120})"));
  EXPECT_FALSE(Accepts(a, R"({"age":121})"));
  EXPECT_FALSE(Accepts(a, R"({"age":-1})"));
}

TEST(JsonSchemaKeywords, MapsOfAdditionalPropertiesArePerValue) {
  // The old compiler read this as "any object" (issue 54's known bug).
  auto c = CompileJsonSchema(Json::parse(R"({"type": "object", "additionalProperties": {"type": "integer"}})"));
  ASSERT_TRUE(c.ok()) << c.status().message();
  const JsonAutomaton a(*c);
  EXPECT_TRUE(Accepts(a, R"({"a":1, "b":2})"));
  EXPECT_TRUE(Accepts(a, "{}"));
  EXPECT_FALSE(Accepts(a, R"({"a":"x"})"));
  auto none = CompileJsonSchema(Json::parse(R"({"type": "object", "additionalProperties": false})"));
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_TRUE(Accepts(JsonAutomaton(*none), "{}"));
  EXPECT_FALSE(Accepts(JsonAutomaton(*none), R"({"a":1})"));
}

// Hostile schemas fail (or compile) alone, in time linear in their size.
TEST(JsonSchemaKeywords, HostileSchemasAreBounded) {
  Json big_enum = Json::object();
  big_enum["enum"] = Json::array();
  for (int i = 0; i < 100000; ++i) big_enum["enum"].push_back("v" + std::to_string(i));
  EXPECT_NE(Refusal(big_enum.dump()).find("keyword 'enum' at /: more than"), std::string::npos);
  std::string deep = R"({"type": "string"})";
  for (int i = 0; i < 1000; ++i) deep = R"({"type": "array", "items": )" + deep + "}";
  EXPECT_NE(Refusal(deep).find("nested deeper than 32 levels"), std::string::npos);
  EXPECT_NE(Refusal(R"({"type": "string", "pattern": "(a|b)*a(a|b){40}"})").find("automaton states"),
            std::string::npos);
  EXPECT_EQ(Refusal(R"({"type": "string", "pattern": "^((a+)+)+$"})"), "(compiled)");
  // Bounds past 15 digits clamp to the generated integers.
  EXPECT_EQ(Refusal(R"({"type": "integer", "minimum": -1e308, "maximum": 1e308})"), "(compiled)");
  // Many properties of a wide enum each: compile time grows linearly.
  const auto wide = [](int scale) {
    Json s = {{"type", "object"}, {"properties", Json::object()}};
    for (int p = 0; p < 32; ++p) {
      Json e = Json::array();
      for (int i = 0; i < 100 * scale * scale; ++i) e.push_back("value" + std::to_string(i));
      s["properties"]["p" + std::to_string(p)] = {{"enum", e}};
    }
    return s;
  };
  const Json small = wide(1), large = wide(2);
  testing::ExpectLinearGrowth("enum compile", [&](int scale) {
    auto c = CompileJsonSchema(scale == 1 ? small : large);
    ASSERT_TRUE(c.ok()) << c.status().message();
  });
}

TEST(JsonSchemaKeywords, PydanticCorpusCompiles) {
  const Json corpus = ReadGolden("json_schemas_pydantic.json");
  ASSERT_GE(corpus.size(), 300u);
  int compiled = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    auto c = CompileJsonSchema(corpus[i]);
    EXPECT_TRUE(c.ok()) << i << ": " << c.status().message() << "\n" << corpus[i].dump();
    if (!c.ok()) continue;
    ++compiled;
    // The shortest value the compiler derives is a document the automaton accepts.
    const JsonAutomaton a(*c);
    EXPECT_TRUE(Accepts(a, c->nodes[size_t(c->root)].shortest)) << i << ": " << c->nodes[size_t(c->root)].shortest;
  }
  std::printf("%d of %zu Pydantic schemas compiled\n", compiled, corpus.size());
}

}  // namespace
}  // namespace anymoe
