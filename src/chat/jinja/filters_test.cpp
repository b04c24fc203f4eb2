// Filters, as Jinja2 defines them (tojson as transformers overrides it).
#include "chat/jinja/test_util.h"

namespace infernix::jinja::testing {
namespace {

TEST(Filters, LengthCountAndFirstLast) {
  nlohmann::ordered_json vars = {{"l", {3, 1, 2}}, {"d", {{"a", 1}, {"b", 2}}}};
  EXPECT_EQ(Render("{{ l | length }} {{ d | count }} {{ 'héllo' | length }} {{ missing | length }}", vars), "3 2 5 0");
  EXPECT_EQ(Render("{{ l | first }} {{ l | last }} {{ 'abc' | first }} {{ 'abc' | last }} {{ d | first }}", vars),
            "3 2 a c a");
  EXPECT_EQ(Render("[{{ [] | first }}]"), "[]");
}

TEST(Filters, StringCase) {
  EXPECT_EQ(Render("{{ 'abc' | upper }} {{ 'ABC' | lower }} {{ 'hELLO wORLD' | capitalize }}"), "ABC abc Hello world");
  EXPECT_EQ(Render("{{ 'hello world-foo(bar' | title }} {{ \"they're\" | title }}"), "Hello World-Foo(Bar They're");
}

TEST(Filters, TrimReplaceAndIndent) {
  EXPECT_EQ(Render("[{{ '  x \\n' | trim }}][{{ '--x--' | trim('-') }}]"), "[x][x]");
  EXPECT_EQ(Render("{{ 'a-b-c' | replace('-', '+') }} {{ 'a-b-c' | replace('-', '', 1) }} {{ 12 | replace('1', 'x') }}"),
            "a+b+c ab-c x2");
  EXPECT_EQ(Render("{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'a\\n\\nb' | indent('> ', blank=true) }}"),
            "a\n  b\n\n  c|  a\n  b|a\n> \n> b");
}

TEST(Filters, DefaultAndItsBooleanMode) {
  nlohmann::ordered_json vars = {{"empty", ""}, {"zero", 0}, {"v", "x"}};
  EXPECT_EQ(Render("{{ missing | default('d') }} {{ v | default('d') }} [{{ empty | default('d') }}] {{ zero | d('d') }}",
                   vars),
            "d x [] 0");
  EXPECT_EQ(Render("{{ empty | default('d', true) }} {{ zero | default('d', boolean=true) }} [{{ missing | default }}]",
                   vars),
            "d d []");
}

TEST(Filters, JoinListItemsAndString) {
  nlohmann::ordered_json vars = {{"users", {{{"name", "ann"}}, {{"name", "bob"}}}}, {"d", {{"k", "v"}, {"n", 1}}}};
  EXPECT_EQ(Render("{{ [1, 'a', none] | join(', ') }} {{ users | join('/', attribute='name') }} {{ 'abc' | join('.') }}",
                   vars),
            "1, a, None ann/bob a.b.c");
  EXPECT_EQ(Render("{{ 'ab' | list }} {{ d | list }} {{ d | items | list }} {{ d | items | first | last }}", vars),
            "['a', 'b'] ['k', 'n'] [('k', 'v'), ('n', 1)] v");
  EXPECT_EQ(Render("{{ 1 | string }}{{ 1.5 | string }}{{ none | string }}{{ [1] | string }}"), "11.5None[1]");
}

TEST(Filters, MapSelectAndReject) {
  nlohmann::ordered_json vars = {
      {"msgs",
       {{{"role", "system"}, {"content", "s"}}, {{"role", "user"}, {"content", "u1"}}, {{"role", "user"}, {"content", "u2"}}}},
      {"nums", {1, 2, 3, 4, 5}}};
  EXPECT_EQ(Render("{{ msgs | map(attribute='role') | list }}", vars), "['system', 'user', 'user']");
  EXPECT_EQ(Render("{{ msgs | map(attribute='name', default='?') | join }}", vars), "???");
  EXPECT_EQ(Render("{{ ['a', 'b'] | map('upper') | list }} {{ [' a ', 'b '] | map('trim') | join('|') }}"), "['A', 'B'] a|b");
  EXPECT_EQ(Render("{{ msgs | selectattr('role', 'equalto', 'user') | map(attribute='content') | join(',') }}", vars),
            "u1,u2");
  EXPECT_EQ(Render("{{ msgs | rejectattr('role', 'eq', 'user') | list | length }}", vars), "1");
  EXPECT_EQ(Render("{{ nums | select('odd') | list }} {{ nums | reject('odd') | list }} {{ [0, 1, '', 'a'] | select | list }}",
                   vars),
            "[1, 3, 5] [2, 4] [1, 'a']");
  EXPECT_EQ(Render("{{ nums | select('gt', 3) | list }} {{ msgs | selectattr('missing') | list }}", vars), "[4, 5] []");
  EXPECT_EQ(Render("{{ msgs | selectattr('role', 'in', ['system']) | list | length }}", vars), "1");
}

TEST(Filters, UniqueSortAndDictSort) {
  EXPECT_EQ(Render("{{ ['b', 'A', 'a', 'b'] | unique | list }} {{ ['b', 'A', 'a'] | unique(case_sensitive=true) | list }}"),
            "['b', 'A'] ['b', 'A', 'a']");
  EXPECT_EQ(Render("{{ [3, 1, 2] | sort }} {{ [3, 1, 2] | sort(reverse=true) }} {{ ['b', 'A', 'c'] | sort }}"),
            "[1, 2, 3] [3, 2, 1] ['A', 'b', 'c']");
  nlohmann::ordered_json vars = {{"people", {{{"n", "x"}, {"age", 30}}, {{"n", "y"}, {"age", 20}}}}, {"d", {{"b", 1}, {"a", 2}}}};
  EXPECT_EQ(Render("{{ people | sort(attribute='age') | map(attribute='n') | join }}", vars), "yx");
  EXPECT_EQ(Render("{{ d | dictsort }} {{ d | dictsort(by='value', reverse=true) }}", vars),
            "[('a', 2), ('b', 1)] [('a', 2), ('b', 1)]");
}

TEST(Filters, Numbers) {
  EXPECT_EQ(Render("{{ '42' | int }} {{ '3.9' | int }} {{ 3.9 | int }} {{ 'x' | int }} {{ 'x' | int(7) }} {{ '0x1f' | int(0, 16) }}"),
            "42 3 3 0 7 31");
  EXPECT_EQ(Render("{{ '2.5' | float }} {{ 3 | float }} {{ 'x' | float }} {{ -3 | abs }} {{ -2.5 | abs }}"),
            "2.5 3.0 0.0 3 2.5");
  EXPECT_EQ(Render("{{ 2.5 | round }} {{ 3.5 | round }} {{ 2.675 | round(2) }} {{ 3 | round }} {{ 2.1 | round(0, 'ceil') }}"
                   " {{ 2.9 | round(method='floor') }}"),
            "2.0 4.0 2.67 3 3.0 2.0");
  EXPECT_EQ(Render("{{ [1, 2, 3] | sum }} {{ [1, 2] | sum(start=10) }} {{ [3, 1, 2] | min }} {{ [3, 1, 2] | max }}"),
            "6 13 1 3");
}

TEST(Filters, EscapingAndMisc) {
  EXPECT_EQ(Render("{{ '<a href=\"x\">&\\'' | escape }} {{ '<b>' | e }} {{ '<b>' | safe }}"),
            "&lt;a href=&#34;x&#34;&gt;&amp;&#39; &lt;b&gt; <b>");
  EXPECT_EQ(Render("{{ 'abc' | reverse }} {{ [1, 2] | reverse | list }} {{ 'one two  three' | wordcount }}"),
            "cba [2, 1] 3");
  EXPECT_EQ(Render("{{ '%s-%s' | format('a', 1) }} {{ [1, 2, 3, 4, 5] | batch(2) | list }} {{ 'ab' | center(6) }}|"),
            "a-1 [[1, 2], [3, 4], [5]]   ab  |");
  EXPECT_EQ(Render("{{ {'a': 1} | attr('items') is callable }} {{ 'x' | pprint }}"), "True 'x'");
}

TEST(ToJson, UsesTransformersDefaults) {
  nlohmann::ordered_json vars = {
      {"tool", {{"name", "get"}, {"parameters", {{"type", "object"}, {"required", {"city"}}, {"n", 1.0}, {"ok", true}}}}}};
  EXPECT_EQ(Render("{{ tool | tojson }}", vars),
            R"({"name": "get", "parameters": {"type": "object", "required": ["city"], "n": 1.0, "ok": true}})");
}

TEST(ToJson, KeepsKeyOrderAndUnicodeAndEscapesControls) {
  nlohmann::ordered_json vars = {{"d", {{"zeta", "ü/€ 😀"}, {"alpha", "a\"b\\c\n\t\x01\x7f"}, {"n", nullptr}}}};
  EXPECT_EQ(Render("{{ d | tojson }}", vars), "{\"zeta\": \"ü/€ 😀\", \"alpha\": \"a\\\"b\\\\c\\n\\t\\u0001\x7f\", \"n\": null}");
  EXPECT_EQ(Render("{{ d.zeta | tojson(ensure_ascii=true) }}", vars), R"("\u00fc/\u20ac \ud83d\ude00")");
}

TEST(ToJson, IndentSeparatorsAndSortKeys) {
  nlohmann::ordered_json vars = {{"v", {{"b", {1, {{"c", nlohmann::ordered_json::array()}}}}, {"a", nlohmann::ordered_json::object()}}}};
  EXPECT_EQ(Render("{{ v | tojson(indent=2) }}", vars),
            "{\n  \"b\": [\n    1,\n    {\n      \"c\": []\n    }\n  ],\n  \"a\": {}\n}");
  EXPECT_EQ(Render("{{ v | tojson(separators=(',', ':')) }}", vars), R"({"b":[1,{"c":[]}],"a":{}})");
  EXPECT_EQ(Render("{{ v | tojson(sort_keys=true) }}", vars), R"({"a": {}, "b": [1, {"c": []}]})");
  EXPECT_EQ(Render("{{ {1: 'x', none: 2.5, true: 'y'} | tojson }}"), R"({"1": "y", "null": 2.5})");  // True == 1
  EXPECT_EQ(Render("{{ (1, 'a') | tojson }} {{ 1e100 | tojson }} {{ -0.0 | tojson }} {{ 'x' | tojson }}"),
            R"([1, "a"] 1e+100 -0.0 "x")");
}

}  // namespace
}  // namespace infernix::jinja::testing
