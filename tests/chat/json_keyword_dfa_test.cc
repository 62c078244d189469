// The keyword automata (pattern, format, numeric ranges, multipleOf) against
// tests/golden/chat/json_keyword_cases.json, whose validity comes from
// Python's jsonschema with format checking (tools/gen_json_schemas.py): no
// accepted text may be invalid, and most valid texts must be accepted.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "chat/json_number_range.h"
#include "chat/json_regex.h"
#include "chat/json_string_formats.h"

namespace anymoe {
namespace {

std::string Bound(const nlohmann::json& v) {
  return v.is_number_integer() ? std::to_string(v.get<int64_t>()) : DecimalText(v.get<double>());
}

TEST(JsonKeywordDfa, AcceptsOnlyWhatJsonschemaValidates) {
  std::ifstream in(std::string(ANYMOE_GOLDEN_DIR) + "/chat/json_keyword_cases.json");
  const auto all = nlohmann::json::parse(in);
  int accepted = 0, valid = 0, checked_schemas = 0;
  for (const auto& e : all) {
    const auto& s = e["schema"];
    Expected<ByteDfa> d = Status::Error("unused");
    bool is_string = false;
    if (s.contains("pattern") && !s.contains("minLength")) {
      d = CompileRegex(s["pattern"].get<std::string>(), RegexMatch::kSearch, 20000);
      is_string = true;
    } else if (s.contains("format")) {
      d = CompileRegex(FormatRegex(s["format"].get<std::string>()), RegexMatch::kWhole, 20000);
      is_string = true;
    } else if (s.value("type", "") == "integer" || s.value("type", "") == "number") {
      NumberBounds b;
      if (s.contains("minimum")) b.minimum = Bound(s["minimum"]);
      if (s.contains("exclusiveMinimum")) b.minimum = Bound(s["exclusiveMinimum"]), b.exclusive_minimum = true;
      if (s.contains("maximum")) b.maximum = Bound(s["maximum"]);
      if (s.contains("exclusiveMaximum")) b.maximum = Bound(s["exclusiveMaximum"]), b.exclusive_maximum = true;
      if (s.contains("multipleOf")) b.multiple_of = s["multipleOf"].get<int64_t>();
      d = s["type"] == "integer" ? IntegerRangeDfa(b, 20000) : NumberRangeDfa(b, 20000);
    } else {
      continue;
    }
    ASSERT_TRUE(d.ok()) << s.dump() << ": " << d.status().message();
    ++checked_schemas;
    for (const auto& c : e["cases"]) {
      std::string text = c[0].get<std::string>();
      if (is_string) text = nlohmann::json::parse(text).get<std::string>();
      const bool ok = c[1].get<bool>();
      const bool accepts = d->Matches(text);
      EXPECT_FALSE(accepts && !ok) << s.dump() << " accepts the invalid " << text;
      accepted += accepts;
      valid += ok;
    }
  }
  EXPECT_EQ(checked_schemas, 41);
  // Valid texts outside the generated subset (exponents, "-0", Feb 29, ...)
  // may be refused; the rest must be accepted.
  EXPECT_GE(accepted, valid * 9 / 10) << accepted << " of " << valid;
}

TEST(JsonKeywordDfa, RefusesWithTheReason) {
  EXPECT_NE(CompileRegex("(a)\\1", RegexMatch::kSearch, 1000).status().message().find("back-references"),
            std::string::npos);
  EXPECT_NE(CompileRegex("a(?=b)", RegexMatch::kSearch, 1000).status().message().find("look-around"),
            std::string::npos);
  // A pattern whose DFA blows up fails at the cap, not by running away.
  EXPECT_NE(CompileRegex("(a|b)*a(a|b){20}", RegexMatch::kWhole, 4096).status().message().find("automaton states"),
            std::string::npos);
  // Nested quantifiers compile in linear time (no backtracking).
  EXPECT_TRUE(CompileRegex("^(a+)+$", RegexMatch::kSearch, 4096).ok());
  NumberBounds huge;
  huge.minimum = "1" + std::string(300, '0');
  EXPECT_FALSE(IntegerRangeDfa(huge, 4096).ok());
  EXPECT_FALSE(NumberRangeDfa(huge, 4096).ok());
}

}  // namespace
}  // namespace anymoe
