// Statements: if, for (loop variables, else, filters, unpacking, break / continue), set (names,
// tuples, namespaces, blocks), macros, call and filter blocks, with, and Jinja's scoping.
#include "chat/jinja/test_util.h"

namespace infernix::jinja::testing {
namespace {

TEST(If, ChoosesTheFirstTrueBranch) {
  std::string source = "{% if n < 0 %}neg{% elif n == 0 %}zero{% elif n < 10 %}small{% else %}big{% endif %}";
  EXPECT_EQ(Render(source, {{"n", -3}}), "neg");
  EXPECT_EQ(Render(source, {{"n", 0}}), "zero");
  EXPECT_EQ(Render(source, {{"n", 5}}), "small");
  EXPECT_EQ(Render(source, {{"n", 50}}), "big");
  EXPECT_EQ(Render("{% if missing %}a{% else %}b{% endif %}"), "b");  // undefined is falsy
  EXPECT_EQ(Render("{% if [] or {} or '' or 0 or 0.0 or none %}a{% else %}b{% endif %}"), "b");
}

TEST(For, ExposesLoopVariables) {
  EXPECT_EQ(Render("{% for x in ['a', 'b', 'c'] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
                   "{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}"),
            "1032TrueFalse3;2121FalseFalse3;3210FalseTrue3;");
}

TEST(For, PrevitemNextitemAndCycle) {
  EXPECT_EQ(Render("{% for i in [1, 2, 3] %}{{ loop.previtem | default('-') }}{{ loop.nextitem | default('-') }}"
                   "{{ loop.cycle('odd', 'even') }},{% endfor %}"),
            "-2odd,13even,2-odd,");
}

TEST(For, ElseRunsForEmptyLoops) {
  EXPECT_EQ(Render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(Render("{% for x in [1] %}x{% else %}empty{% endfor %}"), "x");
  EXPECT_EQ(Render("{% for x in missing %}x{% else %}none{% endfor %}"), "none");
}

TEST(For, FilterConditionSkipsItemsBeforeCounting) {
  EXPECT_EQ(Render("{% for i in range(6) if i is odd %}{{ i }}:{{ loop.index }}/{{ loop.length }} {% endfor %}"),
            "1:1/3 3:2/3 5:3/3 ");
  EXPECT_EQ(Render("{% for i in [1, 2] if i > 5 %}x{% else %}none{% endfor %}"), "none");
}

TEST(For, UnpacksTuplesAndDictItems) {
  nlohmann::ordered_json vars = {{"d", {{"b", 1}, {"a", 2}}}};
  EXPECT_EQ(Render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", vars), "b=1;a=2;");
  EXPECT_EQ(Render("{% for k in d %}{{ k }}{% endfor %}", vars), "ba");
  EXPECT_EQ(Render("{% for (a, b), c in [((1, 2), 3)] %}{{ a }}{{ b }}{{ c }}{% endfor %}"), "123");
  EXPECT_EQ(Render("{% for c in 'héllo' %}[{{ c }}]{% endfor %}"), "[h][é][l][l][o]");
}

TEST(For, BreakAndContinue) {
  EXPECT_EQ(Render("{% for i in range(10) %}{% if i == 4 %}{% break %}{% endif %}{{ i }}{% endfor %}"), "0123");
  EXPECT_EQ(Render("{% for i in range(5) %}{% if i is even %}{% continue %}{% endif %}{{ i }}{% endfor %}"), "13");
  EXPECT_EQ(Render("{% for i in [1, 2] %}{% for j in [1, 2, 3] %}{% if j == 2 %}{% break %}{% endif %}"
                   "{{ i }}{{ j }} {% endfor %}{% endfor %}"),
            "11 21 ");
}

TEST(For, NestedLoopsShadowLoop) {
  EXPECT_EQ(Render("{% for a in [1, 2] %}{% set outer = loop %}{% for b in [1, 2] %}"
                   "{{ outer.index }}{{ loop.index }} {% endfor %}{% endfor %}"),
            "11 12 21 22 ");
}

TEST(Scoping, AssignmentsInsideALoopDoNotEscapeIt) {
  EXPECT_EQ(Render("{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}"), "12121");
  EXPECT_EQ(Render("{% for i in [1, 2] %}{% if loop.first %}{% set y = 5 %}{% endif %}{{ y | default('-') }}"
                   "{% endfor %}"),
            "5-");
}

TEST(Scoping, IfDoesNotOpenAScope) {
  EXPECT_EQ(Render("{% if true %}{% set x = 'in' %}{% endif %}{{ x }}"), "in");
}

TEST(Scoping, NamespaceCarriesValuesOutOfLoops) {
  EXPECT_EQ(Render("{% set ns = namespace(total=0, seen=false) %}{% for i in [1, 2, 3] %}"
                   "{% set ns.total = ns.total + i %}{% set ns.seen = true %}{% endfor %}{{ ns.total }} {{ ns.seen }}"),
            "6 True");
  EXPECT_EQ(Render("{% set ns = namespace() %}{% set ns.items = [] %}{{ ns.items | length }}"), "0");
  EXPECT_EQ(Render("{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}{{ ns.c | default('-') }}"), "12-");
}

TEST(Set, AssignsTuplesAndExpressions) {
  EXPECT_EQ(Render("{% set a, b = 1, 2 %}{{ a }}{{ b }}"), "12");
  EXPECT_EQ(Render("{% set a, b = ['x', 'y'] %}{{ b }}{{ a }}"), "yx");
  EXPECT_EQ(Render("{% set t = 1, 2 %}{{ t }}"), "(1, 2)");
  EXPECT_EQ(Render("{% set x = 'v' if true else 'w' %}{{ x }}"), "v");
}

TEST(Set, BlockSetCapturesRenderedText) {
  EXPECT_EQ(Render("{% set body %}Hello {{ 'world' }}!{% endset %}[{{ body }}]"), "[Hello world!]");
  EXPECT_EQ(Render("{% set shout | upper | replace('!', '?') %}hey!{% endset %}{{ shout }}"), "HEY?");
  EXPECT_EQ(Render("{% set ns = namespace() %}{% set ns.text %}t{% endset %}{{ ns.text }}"), "t");
}

TEST(ListAppend, MutatesTheListInPlace) {
  EXPECT_EQ(Render("{% set l = [] %}{% for i in range(3) %}{% set _ = l.append(i * 2) %}{% endfor %}{{ l }}"),
            "[0, 2, 4]");
  EXPECT_EQ(Render("{% set a = [1] %}{% set b = a %}{% set _ = b.append(2) %}{{ a }}"), "[1, 2]");
  EXPECT_EQ(Render("{% for i in [1] %}{% set l = [] %}{{ l.append(1) }}{{ l }}{% endfor %}"), "None[1]");
}

TEST(Macro, DefaultsKeywordsAndPositionals) {
  std::string source = "{% macro tag(name, cls='x', close=true) %}<{{ name }} c={{ cls }}>{% if close %}</{{ name }}>"
                       "{% endif %}{% endmacro %}";
  EXPECT_EQ(Render(source + "{{ tag('a') }}"), "<a c=x></a>");
  EXPECT_EQ(Render(source + "{{ tag('b', close=false) }}"), "<b c=x>");
  EXPECT_EQ(Render(source + "{{ tag('i', 'y', false) }}"), "<i c=y>");
  EXPECT_EQ(Render(source + "{{ tag(cls='z', name='p') }}"), "<p c=z></p>");
}

TEST(Macro, DefaultsMaySeeEarlierParametersAndOuterNames) {
  EXPECT_EQ(Render("{% set greeting = 'hi' %}{% macro m(a, b=a ~ '!') %}{{ greeting }} {{ b }}{% endmacro %}{{ m('x') }}"),
            "hi x!");
}

TEST(Macro, VarargsAndKwargsWhenTheBodyUsesThem) {
  EXPECT_EQ(Render("{% macro m(a) %}{{ a }}|{{ varargs }}|{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k='v') }}"),
            "1|(2, 3)|{'k': 'v'}");
}

TEST(Macro, RecursionWorksWithinTheDepthLimit) {
  EXPECT_EQ(Render("{% macro count(n) %}{% if n > 0 %}{{ n }}{{ count(n - 1) }}{% endif %}{% endmacro %}{{ count(5) }}"),
            "54321");
}

TEST(Macro, OutputIsAStringValue) {
  EXPECT_EQ(Render("{% macro m() %} x {% endmacro %}{{ m() | trim | upper }}{{ m() | length }}"), "X3");
}

TEST(CallBlock, CallerRendersTheBlockBody) {
  std::string source = "{% macro box(title) %}[{{ title }}: {{ caller() }}]{% endmacro %}"
                       "{% call box('T') %}inside {{ 1 + 1 }}{% endcall %}";
  EXPECT_EQ(Render(source), "[T: inside 2]");
}

TEST(CallBlock, CallerTakesArguments) {
  std::string source = "{% macro each(items) %}{% for i in items %}{{ caller(i, loop.index) }}{% endfor %}{% endmacro %}"
                       "{% call(item, n) each(['a', 'b']) %}{{ n }}={{ item }};{% endcall %}";
  EXPECT_EQ(Render(source), "1=a;2=b;");
}

TEST(FilterBlock, AppliesFiltersToTheBody) {
  EXPECT_EQ(Render("{% filter upper %}abc{{ 'd' }}{% endfilter %}"), "ABCD");
  EXPECT_EQ(Render("{% filter replace('a', 'o') | title %}banana split{% endfilter %}"), "Bonono Split");
}

TEST(With, OpensAScope) {
  EXPECT_EQ(Render("{% set a = 1 %}{% with a = 2, b = 3 %}{{ a }}{{ b }}{% endwith %}{{ a }}"), "231");
}

TEST(Generation, RendersItsBody) {
  EXPECT_EQ(Render("{% generation %}answer{% endgeneration %}"), "answer");
}

TEST(Print, TupleAndPrintTag) {
  EXPECT_EQ(Render("{{ 1, 'a' }}"), "(1, 'a')");
  EXPECT_EQ(Render("{% print 'x' ~ 1 %}"), "x1");
}

}  // namespace
}  // namespace infernix::jinja::testing
