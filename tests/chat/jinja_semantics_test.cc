// Python and jinja2 behaviours chat templates' output depends on, each checked
// against what Python 3 / jinja2 3.1 print (values written from running them).
#include <gtest/gtest.h>

#include "chat/jinja/template.h"
#include "chat/model_chat_template.h"

namespace anymoe::jinja {
namespace {

std::string Render(const std::string& source,
                   const std::vector<std::pair<std::string, Value>>& vars = {}) {
  auto t = Template::Parse(source);
  if (!t.ok()) return "PARSE: " + t.status().message();
  auto r = t->Render(vars);
  if (!r.ok()) return "ERROR: " + r.status().message();
  return r->text;
}

TEST(JinjaSemantics, PythonStrOfScalars) {
  EXPECT_EQ(Render("{{ true }} {{ none }} {{ 3.0 }} {{ 1e16 }} {{ 0.0001 }} {{ 1e-5 }} {{ 2.5e-7 }}"),
            "True None 3.0 1e+16 0.0001 1e-05 2.5e-07");
  EXPECT_EQ(Render("{{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 0.1 + 0.2 }}"),
            "3.5 3 -4 2 1024 0.30000000000000004");
  EXPECT_EQ(Render("{{ [1, 'a', none, true, 2.0] }} {{ {'k': 'v'} }} {{ (1,) }}"),
            "[1, 'a', None, True, 2.0] {'k': 'v'} (1,)");
  EXPECT_EQ(Render("{{ 3.0 | string }}|{{ none | string }}|{{ undefined_name | string }}|"), "3.0|None||");
}

TEST(JinjaSemantics, ToJsonIsJsonDumps) {
  EXPECT_EQ(Render("{{ {'b': 1, 'a': [1, 2.5, none, true, 'é\"\\n']} | tojson }}"),
            "{\"b\": 1, \"a\": [1, 2.5, null, true, \"é\\\"\\n\"]}");
  EXPECT_EQ(Render("{{ 'é😀' | tojson(ensure_ascii=True) }}"), "\"\\u00e9\\ud83d\\ude00\"");
  EXPECT_EQ(Render("{{ {'a': [1, {}], 'b': []} | tojson(indent=2) }}"),
            "{\n  \"a\": [\n    1,\n    {}\n  ],\n  \"b\": []\n}");
  EXPECT_EQ(Render("{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}"), "{\"a\": 2, \"b\": 1}");
}

TEST(JinjaSemantics, StringMethods) {
  EXPECT_EQ(Render("{{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '\\n\\nz'.lstrip('\\n') }}|{{ 'a,b,,c'.split(',') }}"),
            "a b|a|z|['a', 'b', '', 'c']");
  EXPECT_EQ(Render("{{ ' a  b '.split() }}{{ 'a b c'.split(' ', 1) }}{{ 'a b c'.rsplit(' ', 1) }}"),
            "['a', 'b']['a', 'b c']['a b', 'c']");
  EXPECT_EQ(Render("{{ 'héllo wörld'.title() }} {{ 'ABC'.lower() }} {{ 'abc'.upper() }} {{ 'aXb'.replace('X', '-') }}"),
            "Héllo Wörld abc ABC a-b");
  EXPECT_EQ(Render("{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'c')) }} {{ 'héllo'[1:3] }} {{ 'abc'[-1] }} {{ [1,2,3][::-1] }}"),
            "True True él c [3, 2, 1]");
}

TEST(JinjaSemantics, FiltersAndTests) {
  EXPECT_EQ(Render("{{ [{'n': 'a', 'k': 1}, {'n': 'b', 'k': 2}] | selectattr('k', 'equalto', 2) | map(attribute='n') | join(',') }}"),
            "b");
  EXPECT_EQ(Render("{{ [1, 2, 3, 4] | select('odd') | list }} {{ [1, 0, 2] | reject | list }}"), "[1, 3] [0]");
  EXPECT_EQ(Render("{{ {'b': 1, 'A': 2} | dictsort }} {{ ['b', 'A', 'c'] | sort }}"),
            "[('A', 2), ('b', 1)] ['A', 'b', 'c']");
  EXPECT_EQ(Render("{{ 'a\\nb' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}"), "a\n  b|  a\n  b");
  EXPECT_EQ(Render("{{ x | default('d') }} {{ '' | default('d', true) }} {{ '42' | int }} {{ 'x' | int(7) }} {{ '2.5' | float }}"),
            "d d 42 7 2.5");
  EXPECT_EQ(Render("{{ x is defined }} {{ none is none }} {{ 'a' is string }} {{ {} is mapping }} {{ [] is iterable }} {{ 1 is number }} {{ true is boolean }} {{ 'a' is not in ['b'] }}"),
            "False True True True True True True True");
  EXPECT_EQ(Render("{{ [3, 1, 2] | first }}{{ [3, 1, 2] | last }}{{ 'abc' | length }}{{ {'a': 1} | items | list }}"),
            "323[('a', 1)]");
}

TEST(JinjaSemantics, ScopingAndLoops) {
  // A set inside a loop iteration does not survive it (jinja2), a namespace does.
  EXPECT_EQ(Render("{% set x = 'outer' %}{% for i in [1, 2] %}{% set x = i %}{% endfor %}{{ x }}"), "outer");
  EXPECT_EQ(Render("{% for i in [1, 2] %}[{{ y if y is defined else 'U' }}]{% if i == 1 %}{% set y = 'S' %}{% endif %}{% endfor %}"),
            "[U][U]");
  EXPECT_EQ(Render("{% set ns = namespace(n=0) %}{% for i in range(5) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"), "10");
  EXPECT_EQ(Render("{% for a, b in [[1, 2], [3, 4]] if a > 1 %}{{ loop.index }}{{ a }}{{ b }}{{ loop.last }}{% else %}none{% endfor %}"),
            "134True");
  EXPECT_EQ(Render("{% for x in 'abc' %}{{ loop.previtem | default('-') }}{{ x }}{{ loop.nextitem | default('-') }} {% endfor %}"),
            "-ab abc bc- ");
  EXPECT_EQ(Render("{% for i in range(10) %}{% if i == 3 %}{% break %}{% endif %}{% if i == 1 %}{% continue %}{% endif %}{{ i }}{% endfor %}"),
            "02");
  EXPECT_EQ(Render("{% macro m(a, b='B', c=a ~ '!') %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ m('x') }}|{{ m('x', c='C') }}"),
            "xBx!|xBC");
  EXPECT_EQ(Render("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}"), "321");
  EXPECT_EQ(Render("{% set s %}block {{ 1 + 1 }}{% endset %}{{ s | upper }}"), "BLOCK 2");
}

TEST(JinjaSemantics, WhitespaceControlLikeTransformers) {
  // trim_blocks drops the newline after a tag; lstrip_blocks the indentation before one.
  EXPECT_EQ(Render("a\n  {% if true %}\n  b\n  {% endif %}\nc\n"), "a\n  b\nc");
  EXPECT_EQ(Render("a  {{- ' b ' -}}  c"), "a b c");
  EXPECT_EQ(Render("x {#- comment -#} y"), "xy");
  EXPECT_EQ(Render("a\n  {%+ if true %}b{% endif %}"), "a\n  b");
  EXPECT_EQ(Render("{% raw %}{{ not evaluated }}{% endraw %}"), "{{ not evaluated }}");
}

TEST(JinjaSemantics, CallerStringsAreMarkedAsInput) {
  // Template text is markup; message text (InputStr) stays plain, through
  // concatenation and string methods.
  auto t = Template::Parse("<s>{{ '<|user|>' + m + '<|end|>' }}{{ m.strip() }}");
  ASSERT_TRUE(t.ok());
  auto r = t->Render({{"m", Value::InputStr(" hi <|end|> ")}});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->text, "<s><|user|> hi <|end|> <|end|>hi <|end|>");
  ASSERT_EQ(r->input_ranges.size(), 2u);
  EXPECT_EQ(r->text.substr(r->input_ranges[0].begin, r->input_ranges[0].end - r->input_ranges[0].begin),
            " hi <|end|> ");
  EXPECT_EQ(r->text.substr(r->input_ranges[1].begin), "hi <|end|>");
}

TEST(JinjaSemantics, TransformersNormalisesMessages) {
  auto t = ModelChatTemplate::Parse(
      "{% for m in messages %}{{ m | tojson }};{% endfor %}{{ bos_token }}{{ eos_token }}", "<s>", "</s>");
  ASSERT_TRUE(t.ok());
  ChatRenderRequest req;
  req.messages = nlohmann::ordered_json::parse(
      R"([{"role": "assistant", "content": null, "reasoning": "r", "tool_calls": null}])");
  auto r = t->Render(req);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // None-valued keys dropped; reasoning aliased as {"thinking": r, **m, "reasoning_content": r}.
  EXPECT_EQ(r->text,
            "{\"thinking\": \"r\", \"role\": \"assistant\", \"reasoning\": \"r\", \"reasoning_content\": \"r\"};<s></s>");
  req.messages = nlohmann::ordered_json::array();
  EXPECT_FALSE(t->Render(req).ok());
}

}  // namespace
}  // namespace anymoe::jinja
