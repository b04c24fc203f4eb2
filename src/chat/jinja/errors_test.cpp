// Bad templates and bad data: every failure is an infernix::Error naming the template position and
// what went wrong, never a crash.
#include "chat/jinja/test_util.h"

namespace infernix::jinja::testing {
namespace {

TEST(SyntaxErrors, MismatchedEndTagNamesBothTags) {
  ErrorCode code{};
  std::string error = RenderError("line one\n{% if x %}\n  {% for y in z %}\n  {% endif %}", nullptr, &code);
  EXPECT_EQ(code, ErrorCode::kInvalidFormat);
  EXPECT_TRUE(Contains(error, "test, line 4, column 6: unexpected 'endif', expected 'endfor' or 'else' "
                              "(to close the 'for' at line 3, column 3)"));
}

TEST(SyntaxErrors, UnclosedBlocksAndTags) {
  EXPECT_TRUE(Contains(RenderError("{% if x %}\nabc"),
                       "line 2, column 4: unexpected end of template, expected 'elif' or 'else' or 'endif' "
                       "(to close the 'if' at line 1, column 1)"));
  EXPECT_TRUE(Contains(RenderError("ab {{ x "), "line 1, column 4: unterminated tag: missing '}}'"));
  EXPECT_TRUE(Contains(RenderError("{# never closed"), "line 1, column 1: unterminated comment"));
  EXPECT_TRUE(Contains(RenderError("{{ 'abc }}"), "line 1, column 4: unterminated string literal"));
  EXPECT_TRUE(Contains(RenderError("{% endfor %}"), "unexpected 'endfor': there is no open block to close"));
}

TEST(SyntaxErrors, BadExpressions) {
  EXPECT_TRUE(Contains(RenderError("{{ 1 + }}"), "line 1, column 8: unexpected '}}', expected an expression"));
  EXPECT_TRUE(Contains(RenderError("{{ (1, 2 }}"), "unexpected '}', expected ')'"));
  EXPECT_TRUE(Contains(RenderError("{{ a b }}"), "line 1, column 6: unexpected 'b', expected '}}'"));
  EXPECT_TRUE(Contains(RenderError("{{ a ! b }}"), "unexpected character '!'"));
  EXPECT_TRUE(Contains(RenderError("{% set 1 = 2 %}"), "expected a variable name to assign"));
  EXPECT_TRUE(Contains(RenderError("{% macro m(a=1, b) %}{% endmacro %}"), "without a default follows"));
  EXPECT_TRUE(Contains(RenderError("{{ f(a=1, 2) }}"), "positional argument follows keyword argument"));
  EXPECT_TRUE(Contains(RenderError("{% break %}"), "'break' outside of a for loop"));
}

TEST(SyntaxErrors, UnknownTagsFiltersAndTestsAreReportedWhenParsing) {
  ErrorCode code{};
  EXPECT_TRUE(Contains(RenderError("{% frobnicate %}", nullptr, &code), "line 1, column 4: unknown tag 'frobnicate'"));
  EXPECT_EQ(code, ErrorCode::kUnsupported);
  // Even in a branch that never runs, as in Jinja2.
  EXPECT_TRUE(Contains(RenderError("{% if false %}\n  {{ x | foo }}\n{% endif %}"), "line 2, column 10: unknown filter 'foo'"));
  EXPECT_TRUE(Contains(RenderError("{{ x is shiny }}"), "unknown test 'shiny'"));
  EXPECT_TRUE(Contains(RenderError("{% include 'other.jinja' %}"), "the 'include' tag is not supported"));
}

TEST(RuntimeErrors, RaiseExceptionCarriesItsMessage) {
  ErrorCode code{};
  std::string error = RenderError("{%- if messages[0].role != 'system' %}\n  {{- raise_exception('System message first!') }}\n"
                                  "{%- endif %}",
                                  {{"messages", {{{"role", "user"}}}}}, &code);
  EXPECT_EQ(code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(Contains(error, "test, line 2, column 7: template raised an error: System message first!"));
}

TEST(RuntimeErrors, UndefinedVariableInOutput) {
  std::string error = RenderError("Hello {{ nmae }}!", {{"name", "x"}});
  EXPECT_TRUE(Contains(error, "line 1, column 10: 'nmae' is undefined"));
  EXPECT_TRUE(Contains(RenderError("{{ 'a' ~ missing }}"), "'missing' is undefined"));
  EXPECT_TRUE(Contains(RenderError("{{ missing | upper }}"), "'missing' is undefined"));
  EXPECT_TRUE(Contains(RenderError("{% macro m(a) %}{{ a }}{% endmacro %}{{ m() }}"), "parameter 'a' was not given"));
  // Tests, defaults and truth tests on undefined names are fine.
  EXPECT_EQ(Render("{{ missing is defined }}{{ missing | default('d') }}{% if missing %}x{% endif %}"), "Falsed");
}

TEST(RuntimeErrors, AttributeOfUndefined) {
  std::string error = RenderError("{{ message.content }}");
  EXPECT_TRUE(Contains(error, "line 1, column 12: cannot read attribute 'content' of an undefined value ('message' is undefined)"));
  EXPECT_TRUE(Contains(RenderError("{{ d.a.b }}", {{"d", nlohmann::ordered_json::object()}}),
                       "cannot read attribute 'b' of an undefined value ('dict' object has no attribute or key 'a')"));
  EXPECT_TRUE(Contains(RenderError("{{ x[0] }}"), "cannot index an undefined value"));
}

TEST(RuntimeErrors, CallingNonCallables) {
  EXPECT_TRUE(Contains(RenderError("{{ messages() }}", {{"messages", {1}}}),
                       "line 1, column 4: 'messages' is a 'list', not a function"));
  EXPECT_TRUE(Contains(RenderError("{{ nothing() }}"), "'nothing' is undefined: an undefined value cannot be called"));
  EXPECT_TRUE(Contains(RenderError("{{ 'abc'.nomethod() }}"), "'str' object has no attribute 'nomethod'"));
  EXPECT_TRUE(Contains(RenderError("{{ (1)(2) }}"), "'int' object is not callable"));
}

TEST(RuntimeErrors, TypeErrors) {
  EXPECT_TRUE(Contains(RenderError("{{ 'a' + 1 }}"), "line 1, column 8: unsupported operand types for +: 'str' and 'int'"));
  EXPECT_TRUE(Contains(RenderError("{{ 1 / 0 }}"), "division by zero"));
  EXPECT_TRUE(Contains(RenderError("{{ 1 < 'a' }}"), "cannot order values of types 'int' and 'str'"));
  EXPECT_TRUE(Contains(RenderError("{{ 1 in 2 }}"), "'in' needs a string, list or dict"));
  EXPECT_TRUE(Contains(RenderError("{% for x in 5 %}{% endfor %}"), "line 1, column 13: 'int' object is not iterable"));
  EXPECT_TRUE(Contains(RenderError("{{ 9223372036854775807 + 1 }}"), "integer overflow"));
  EXPECT_TRUE(Contains(RenderError("{% set x = 1 %}{% set x.a = 2 %}"), "cannot assign attribute 'a': 'x' is a 'int'"));
  EXPECT_TRUE(Contains(RenderError("{% set a, b = [1, 2, 3] %}"), "cannot unpack 3 value(s) into 2 names"));
  EXPECT_TRUE(Contains(RenderError("{{ range(1000000) }}"), "too large"));
  EXPECT_TRUE(Contains(RenderError("{{ undefined_thing | tojson }}"), "not JSON serializable"));
}

// A template that loops without end or builds text past any prompt ends in an error naming the limit
// and where (kMaxRenderSteps, kMaxTextBytes), not in a stuck request or exhausted memory.
TEST(RuntimeErrors, WorkAndTextLimits) {
  ErrorCode code{};
  std::string e =
      RenderError("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", nullptr, &code);
  EXPECT_EQ(code, ErrorCode::kOutOfRange);
  EXPECT_TRUE(Contains(e, "line 1, column 29: the template ran more than 10000000 statements")) << e;
  e = RenderError("{% set s = namespace(t='ab') %}{% for i in range(40) %}{% set s.t = s.t ~ s.t %}{% endfor %}");
  EXPECT_TRUE(Contains(e, "passes the template limit of 67108864")) << e;
  EXPECT_TRUE(Contains(RenderError("{% set s = namespace(t='ab') %}{% for i in range(40) %}{% set s.t = s.t + s.t "
                                   "%}{% endfor %}"),
                       "passes the template limit"));
  EXPECT_TRUE(Contains(RenderError("{{ 'ab' * 40000000 }}"), "string repetition result too large"));
  EXPECT_TRUE(Contains(RenderError("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}"),
                       "the template's output passed 67108864 bytes"));
  EXPECT_TRUE(Contains(RenderError("{{ 'x' | center(300000000) }}"), "a string of 300000000 bytes passes"));
  EXPECT_TRUE(Contains(RenderError("{{ 'x'.ljust(300000000) }}"), "passes the template limit"));
  EXPECT_TRUE(Contains(RenderError("{{ ('x' * 60000000) | replace('x', 'yyyy') }}"), "passes the template limit"));
  EXPECT_TRUE(Contains(RenderError("{{ ['x' * 40000000, 'y' * 40000000] | join }}"), "passes the template limit"));
  EXPECT_TRUE(Contains(RenderError("{% set ns = namespace(l=[1]) %}{% for i in range(30) %}{% set ns.l = ns.l + ns.l "
                                   "%}{% endfor %}"),
                       "a list of 2097152 items passes the template limit of 1048576"));
  EXPECT_TRUE(Contains(RenderError("{{ [1] * 2000000 }}"), "list repetition result too large"));
  // Counts whose product with the length wraps around 2^64.
  EXPECT_TRUE(Contains(RenderError("{{ 'abcd' * 4611686018427387904 }}"), "string repetition result too large"));
  EXPECT_TRUE(Contains(RenderError("{{ [1, 2, 3, 4] * 4611686018427387904 }}"), "list repetition result too large"));
  EXPECT_EQ(Render("{{ ('' * 4611686018427387904) | length }} {{ ([] * 4611686018427387904) | length }}"), "0 0");
  EXPECT_TRUE(Contains(RenderError("{% set l = [1] %}{% for i in range(30) %}{% set _ = l.extend(l | list) %}"
                                   "{% endfor %}"),
                       "passes the template limit"));
  // Within the limits: a long loop and a few MB of output.
  EXPECT_EQ(Render("{% for i in range(100000) %}{{ 'x' * 20 }}{% endfor %}").size(), size_t{2000000});
}

TEST(RuntimeErrors, BadArguments) {
  EXPECT_TRUE(Contains(RenderError("{{ 'a'.split(',', 1, 2) }}"), "str.split takes at most 2 argument(s), 3 given"));
  EXPECT_TRUE(Contains(RenderError("{{ [1] | join(sep=',') }}"), "join got an unexpected keyword argument 'sep'"));
  EXPECT_TRUE(Contains(RenderError("{{ 'x'.split('') }}"), "empty separator"));
  EXPECT_TRUE(Contains(RenderError("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}"), "macro 'm' takes at most 1 argument(s)"));
  EXPECT_TRUE(Contains(RenderError("{% macro m(a) %}{% endmacro %}{{ m(b=1) }}"), "takes no keyword argument 'b'"));
  EXPECT_TRUE(Contains(RenderError("{{ '{} {}'.format(1) }}"), "replacement index 1 out of range"));
  EXPECT_TRUE(Contains(RenderError("{{ '%d' % 'x' }}"), "%d format: a number is required"));
}

TEST(Limits, RunawayMacroRecursionIsAnError) {
  ErrorCode code{};
  std::string error = RenderError("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", nullptr, &code);
  EXPECT_EQ(code, ErrorCode::kOutOfRange);
  EXPECT_TRUE(Contains(error, "macro 'f': calls nested deeper than 64 levels"));
}

TEST(Limits, DeeplyNestedTemplatesAreRejected) {
  std::string nested_expr = "{{ " + std::string(1000, '(') + "1" + std::string(1000, ')') + " }}";
  EXPECT_TRUE(Contains(RenderError(nested_expr), "nested deeper than"));
  std::string nested_not = "{{ " + std::string(0, ' ');
  for (int i = 0; i < 1000; ++i) nested_not += "not ";
  EXPECT_TRUE(Contains(RenderError(nested_not + "x }}"), "nested deeper than"));
  std::string nested_blocks;
  for (int i = 0; i < 500; ++i) nested_blocks += "{% if true %}";
  EXPECT_TRUE(Contains(RenderError(nested_blocks), "nested deeper than"));
}

TEST(Limits, DeepDataIsAnErrorNotACrash) {
  EXPECT_TRUE(Contains(RenderError("{% set ns = namespace(v=[]) %}{% for i in range(5000) %}{% set ns.v = [ns.v] %}"
                                   "{% endfor %}"),
                       "nested deeper than"));
  std::string deep = "{% set l = [] %}{% set ns = namespace(v=l) %}{% for i in range(5000) %}{% set next = [] %}"
                     "{% set _ = ns.v.append(next) %}{% set ns.v = next %}{% endfor %}";
  EXPECT_EQ(Render(deep + "{{ l | length }}"), "1");
  EXPECT_TRUE(Contains(RenderError(deep + "{{ l }}"), "nested deeper than"));
  EXPECT_TRUE(Contains(RenderError(deep + "{{ l | tojson }}"), "nested deeper than"));
}

TEST(Errors, InvalidUtf8IsPassedThrough) {
  std::string bad = "a\xff\xfe{{ x }}";
  EXPECT_EQ(Render(bad, {{"x", "y"}}), "a\xff\xfey");
}

}  // namespace
}  // namespace infernix::jinja::testing
