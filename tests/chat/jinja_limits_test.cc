// Hostile templates fail with a one-line error within their budgets: endless
// loops, huge output, deep recursion, memory blow-ups, deep nesting, and tags
// that would reach outside the template.
#include <gtest/gtest.h>

#include <chrono>

#include "chat/jinja/template.h"

namespace anymoe::jinja {
namespace {

// The wall-time bound every hostile template must stay under. The sanitizer
// build (-O1, every access checked) runs the evaluator ~6x slower: the default
// step budget's endless loop took 1.7 s in the release build and 10.5 s under
// ASan on a 2-core AVX2 VM (over the old 10 s bound there and in CI). The bound
// says "bounded", not "fast"; the steps themselves are counted exactly.
#if defined(__SANITIZE_ADDRESS__)
constexpr double kSecondsBound = 60.0;
#else
constexpr double kSecondsBound = 10.0;
#endif

struct Outcome {
  Status status;
  double seconds;
};

Outcome RenderSource(const std::string& source, const RenderOptions& options = {}) {
  const auto start = std::chrono::steady_clock::now();
  Status status;
  auto t = Template::Parse(source);
  if (!t.ok()) {
    status = t.status();
  } else {
    auto r = t->Render({}, options);
    if (!r.ok()) status = r.status();
  }
  return {status, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
}

void ExpectFails(const std::string& source, const std::string& needle, const RenderOptions& options = {}) {
  const Outcome o = RenderSource(source, options);
  ASSERT_FALSE(o.status.ok()) << source;
  EXPECT_NE(o.status.message().find(needle), std::string::npos) << o.status.message();
  EXPECT_EQ(o.status.message().find('\n'), std::string::npos) << "one line: " << o.status.message();
  EXPECT_LT(o.seconds, kSecondsBound) << source;
}

TEST(JinjaLimits, InfiniteLoopRunsOutOfSteps) {
  // Nested ranges: 10^10 iterations if nothing stopped it; the default budget
  // stops it within seconds, a smaller one sooner.
  const std::string endless =
      "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}";
  ExpectFails(endless, "budget");  // steps or memory, whichever runs out first
  RenderOptions small;
  small.limits.max_steps = 100000;
  ExpectFails(endless, "100000 evaluation steps", small);
}

TEST(JinjaLimits, GigabyteOutputStopsAtTheOutputLimit) {
  RenderOptions o;
  o.limits.max_output_bytes = 1 << 20;
  ExpectFails("{% for i in range(1000000) %}{{ 'x' * 1000 }}{% endfor %}", "output exceeds", o);
}

TEST(JinjaLimits, StringDoublingRunsOutOfMemoryBudget) {
  ExpectFails("{% set ns = namespace(s='xxxxxxxx') %}{% for i in range(64) %}"
              "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}",
              "memory budget");
}

TEST(JinjaLimits, HugeRepeatIsRefusedBeforeAllocating) {
  ExpectFails("{{ 'abc' * 1000000000000 }}", "memory budget");
  ExpectFails("{{ range(1000000000000) | length }}", "memory budget");
}

TEST(JinjaLimits, RecursiveMacroHitsTheDepthLimit) {
  ExpectFails("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "nested deeper");
}

TEST(JinjaLimits, DeepNestingIsASyntaxError) {
  ExpectFails("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}", "nesting deeper");
  std::string ifs;
  for (int i = 0; i < 1000; ++i) ifs += "{% if true %}";
  ExpectFails(ifs, "nesting deeper");
}

TEST(JinjaLimits, NoFileAccess) {
  ExpectFails("{% include '/etc/passwd' %}", "cannot load other files");
  ExpectFails("{% extends 'base.html' %}", "cannot load other files");
  ExpectFails("{% import 'x' as y %}", "cannot load other files");
}

TEST(JinjaLimits, SandboxRefusesMutationAndDunders) {
  ExpectFails("{% set l = [1] %}{{ l.append(2) }}", "unsafe");
  ExpectFails("{% set d = {} %}{{ d.update({'a': 1}) }}", "unsafe");
  ExpectFails("{% set ns = namespace(_x=1) %}", "underscore");
  // Underscore attributes are simply not there.
  const Outcome o = RenderSource("{{ ''.__class__ }}{{ [].__len__ is defined }}");
  EXPECT_TRUE(o.status.ok()) << o.status.message();
}

TEST(JinjaLimits, SyntaxErrorsNameTheLine) {
  ExpectFails("line one\n{% if %}", "line 2");
  ExpectFails("{{ 'unterminated }}", "end of string");
  ExpectFails("{% for x in y %}", "missing 'endfor'");
  ExpectFails("{% frobnicate %}", "unsupported tag 'frobnicate'");
}

TEST(JinjaLimits, RaiseExceptionIsTheTemplatesMessage) {
  const Outcome o = RenderSource("{{ raise_exception('Conversation roles must alternate') }}");
  EXPECT_EQ(o.status.message(), "chat template raised: Conversation roles must alternate");
}

}  // namespace
}  // namespace anymoe::jinja
