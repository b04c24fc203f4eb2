// Expressions: literals, operators and their precedence, attribute / item access, slicing, Python
// string / list / dict methods, and Jinja tests.
#include "chat/jinja/test_util.h"

namespace infernix::jinja::testing {
namespace {

TEST(Literals, StringsWithEscapes) {
  EXPECT_EQ(Render(R"({{ 'it\'s' }}|{{ "say \"hi\"" }}|{{ 'a\tb' }}|{{ '\x41\u00e9\U0001F600' }}|{{ 'a' 'b' }})"),
            "it's|say \"hi\"|a\tb|Aé😀|ab");
  EXPECT_EQ(Render(R"({{ '\\n' }}|{{ '\d' }}|{{ '\101' }})"), "\\n|\\d|A");  // unknown escapes keep the backslash
  EXPECT_EQ(Render("{{ 'line\nbreak' }}"), "line\nbreak");
}

TEST(Literals, NumbersBooleansNoneAndContainers) {
  EXPECT_EQ(Render("{{ 42 }} {{ 1_000 }} {{ 0x1F }} {{ 0b101 }} {{ 0o17 }} {{ 2.5 }} {{ 1e3 }} {{ 1.5E-2 }}"),
            "42 1000 31 5 15 2.5 1000.0 0.015");
  EXPECT_EQ(Render("{{ true }} {{ True }} {{ false }} {{ none }} {{ None }}"), "True True False None None");
  EXPECT_EQ(Render("{{ [1, 'a', none, true] }} {{ (1,) }} {{ () }} {{ {'k': 'v', 1: 2.0} }} {{ [1, 2,] }}"),
            "[1, 'a', None, True] (1,) () {'k': 'v', 1: 2.0} [1, 2]");
}

TEST(Operators, ArithmeticFollowsPython) {
  EXPECT_EQ(Render("{{ 7 + 3 }} {{ 7 - 10 }} {{ 6 * 7 }} {{ 7 / 2 }} {{ 8 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }}"),
            "10 -3 42 3.5 4.0 3 -4 1");
  EXPECT_EQ(Render("{{ -7 % 3 }} {{ 7 % -3 }} {{ 7.5 % 2 }} {{ -7.5 // 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 2 ** 0.5 }}"),
            "2 -2 1.5 -4.0 1024 0.5 1.4142135623730951");
  EXPECT_EQ(Render("{{ 1 + 2.0 }} {{ true + 1 }} {{ 0.1 + 0.2 }} {{ 'ab' * 3 }} {{ [0] * 2 }} {{ [1] + [2] }}"),
            "3.0 2 0.30000000000000004 ababab [0, 0] [1, 2]");
}

TEST(Operators, PrecedenceMatchesJinja) {
  EXPECT_EQ(Render("{{ 2 + 3 * 4 }} {{ (2 + 3) * 4 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ 10 - 2 - 3 }}"), "14 20 64 4 5");
  EXPECT_EQ(Render("{{ 'x' + 1 ~ 2 }} {{ 'a' ~ 1 * 2 }} {{ -3 | abs }} {{ not true or true }} {{ not (true or true) }}"),
            "x12 a2 3 True False");
}

TEST(Operators, ConcatenationConvertsToText) {
  EXPECT_EQ(Render("{{ 'n=' ~ 1 ~ ', f=' ~ 1.0 ~ ', b=' ~ true ~ ', none=' ~ none ~ ', l=' ~ [1] }}"),
            "n=1, f=1.0, b=True, none=None, l=[1]");
  EXPECT_EQ(Render("{{ 'x' ~ d.missing ~ 'y' }}", {{"d", nlohmann::ordered_json::object()}}), "xy");
}

TEST(Operators, ComparisonsAndMembership) {
  EXPECT_EQ(Render("{{ 1 == 1.0 }} {{ 'a' == 'a' }} {{ 1 != 2 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 < 2 < 3 }}"),
            "True True True True True True");
  EXPECT_EQ(Render("{{ 3 > 2 > 2 }} {{ '1' == 1 }} {{ none == none }} {{ [1, 'a'] == [1, 'a'] }} {{ {'a': 1} == {'a': 1} }}"),
            "False False True True True");
  EXPECT_EQ(Render("{{ 'ell' in 'hello' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'x' not in 'abc' }} {{ 1 in missing }}"),
            "True True True True False");
}

TEST(Operators, AndOrReturnOperands) {
  EXPECT_EQ(Render("{{ 0 or 'x' }} {{ 'a' and 'b' }} {{ '' and 'b' }}|{{ none or [] }} {{ missing or 'fallback' }}"),
            "x b |[] fallback");
}

TEST(Operators, ConditionalExpression) {
  EXPECT_EQ(Render("{{ 'yes' if 1 else 'no' }} {{ 'yes' if 0 else 'no' }} [{{ 'only' if false }}]"), "yes no []");
  EXPECT_EQ(Render("{{ 'a' if false else 'b' if true else 'c' }}"), "b");
}

TEST(Access, AttributesAndSubscripts) {
  nlohmann::ordered_json vars = {{"m", {{"role", "user"}, {"items", "key"}, {"list", {10, 20, 30}}}}};
  EXPECT_EQ(Render("{{ m.role }} {{ m['role'] }} {{ m.list[1] }} {{ m.list[-1] }} {{ m.list.0 }}", vars),
            "user user 20 30 10");
  // As in Jinja, `.items` is the dict method while ['items'] is the key.
  EXPECT_EQ(Render("{{ m['items'] }} {{ m.items() | length }}", vars), "key 3");
  EXPECT_EQ(Render("[{{ m.missing }}][{{ m.list[7] }}][{{ none.x }}][{{ 'abc'[10] }}]", vars), "[][][][]");
  EXPECT_EQ(Render("{{ m.missing is defined }} {{ m.role is defined }} {{ m.missing is undefined }}", vars),
            "False True True");
}

TEST(Access, SlicingWithSteps) {
  nlohmann::ordered_json vars = {{"l", {1, 2, 3, 4, 5}}};
  EXPECT_EQ(Render("{{ l[1:] }} {{ l[:-1] }} {{ l[::-1] }} {{ l[::2] }} {{ l[1:4:2] }} {{ l[-2:] }} {{ l[10:] }}", vars),
            "[2, 3, 4, 5] [1, 2, 3, 4] [5, 4, 3, 2, 1] [1, 3, 5] [2, 4] [4, 5] []");
  EXPECT_EQ(Render("{{ l[3:0:-1] }} {{ l[:] }} {{ 'héllo'[1:3] }} {{ 'abc'[::-1] }} {{ (1, 2, 3)[1:] }}", vars),
            "[4, 3, 2] [1, 2, 3, 4, 5] él cba (2, 3)");
}

TEST(Methods, DictMethods) {
  nlohmann::ordered_json vars = {{"d", {{"z", 1}, {"a", 2}}}};
  EXPECT_EQ(Render("{{ d.keys() | list }} {{ d.values() | list }} {{ d.items() | list }}", vars),
            "['z', 'a'] [1, 2] [('z', 1), ('a', 2)]");
  EXPECT_EQ(Render("{{ d.get('a') }} {{ d.get('q') }} {{ d.get('q', 'dflt') }}", vars), "2 None dflt");
}

TEST(Methods, StringPrefixSuffixAndSearch) {
  EXPECT_EQ(Render("{{ 'hello'.startswith('he') }} {{ 'hello'.endswith(('x', 'lo')) }} {{ 'hello'.startswith('l', 2) }}"),
            "True True True");
  EXPECT_EQ(Render("{{ 'hello'.find('l') }} {{ 'hello'.rfind('l') }} {{ 'hello'.find('z') }} {{ 'héllo'.find('l') }}"),
            "2 3 -1 2");
  EXPECT_EQ(Render("{{ 'banana'.count('a') }} {{ 'banana'.count('an') }} {{ 'a,b'.index(',') }}"), "3 2 1");
}

TEST(Methods, StringSplit) {
  EXPECT_EQ(Render("{{ '  a b\t c  '.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a,b,c'.split(',', 1) }}"),
            "['a', 'b', 'c'] ['a', 'b', '', 'c'] ['a', 'b,c']");
  EXPECT_EQ(Render("{{ 'a b c'.split(none, 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ '  a b  c  '.rsplit(none, 1) }}"),
            "['a', 'b c'] ['a,b', 'c'] ['  a b', 'c']");
  EXPECT_EQ(Render("{{ ''.split() }} {{ ''.split(',') }} {{ 'x</think>y'.split('</think>')[-1] }}"), "[] [''] y");
  EXPECT_EQ(Render("{{ 'a\\nb\\r\\nc'.splitlines() }}"), "['a', 'b', 'c']");
}

TEST(Methods, StringStripReplaceAndCase) {
  EXPECT_EQ(Render("[{{ '  x  '.strip() }}][{{ '\\n\\nx\\n'.lstrip('\\n') }}][{{ 'xxhixx'.strip('x') }}]"
                   "[{{ 'ab  '.rstrip() }}][{{ '<<a>>'.lstrip('<') }}]"),
            "[x][x\n][hi][ab][a>>]");
  EXPECT_EQ(Render("{{ 'aaa'.replace('a', 'b') }} {{ 'aaa'.replace('a', 'b', 2) }} {{ 'ab'.replace('', '-') }}"),
            "bbb bba -a-b-");
  EXPECT_EQ(Render("{{ 'Hello'.upper() }} {{ 'Hello'.lower() }} {{ 'hELLO wORLD'.title() }} {{ 'hELLO'.capitalize() }}"),
            "HELLO hello Hello World Hello");
  EXPECT_EQ(Render("{{ \"they're 1st\".title() }} {{ 'éa'.upper() }} {{ 'ΑΒΓ'.lower() }}"), "They'Re 1St ÉA αβγ");
}

TEST(Methods, StringFormatJoinAndPadding) {
  EXPECT_EQ(Render("{{ '{} and {}'.format(1, 'b') }} {{ '{1}{0}'.format('a', 'b') }} {{ '{name}!'.format(name='x') }}"),
            "1 and b ba x!");
  EXPECT_EQ(Render("{{ '{:>5}|{:<4}|{:^7}|{:05.1f}|{:,}|{:x}|{!r}'.format('ab', 'c', 'mid', 3.14159, 1234567, 255, 'q') }}"),
            "   ab|c   |  mid  |003.1|1,234,567|ff|'q'");
  EXPECT_EQ(Render("{{ ', '.join(['a', 'b']) }} {{ 'ab'.center(6, '*') }} {{ '7'.zfill(3) }} {{ 'ab'.ljust(4) }}|"),
            "a, b **ab** 007 ab  |");
  EXPECT_EQ(Render("{{ '%s is %d years, %.2f%%' % ('Al', 30, 99.5) }} {{ '%-4s|%5.1f|%x' % ('a', 2.25, 255) }}"),
            "Al is 30 years, 99.50% a   |  2.2|ff");
}

TEST(Methods, StringPredicates) {
  EXPECT_EQ(Render("{{ '123'.isdigit() }} {{ '12a'.isdigit() }} {{ 'abc'.isalpha() }} {{ '  '.isspace() }} "
                   "{{ 'abc'.islower() }} {{ 'ABC'.isupper() }} {{ ''.isdigit() }}"),
            "True False True True True True False");
}

TEST(Tests, TypeTests) {
  nlohmann::ordered_json vars = {{"d", {{"a", 1}}}, {"l", {1}}, {"s", "x"}, {"i", 1}, {"f", 1.5}, {"n", nullptr}, {"b", true}};
  EXPECT_EQ(Render("{{ d is mapping }}{{ l is mapping }}{{ s is string }}{{ i is string }}{{ i is number }}"
                   "{{ f is number }}{{ b is number }}{{ i is integer }}{{ b is integer }}{{ f is float }}",
                   vars),
            "TrueFalseTrueFalseTrueTrueTrueTrueFalseTrue");
  EXPECT_EQ(Render("{{ n is none }}{{ s is none }}{{ b is boolean }}{{ i is boolean }}{{ b is true }}{{ i is true }}"
                   "{{ false is false }}{{ l is sequence }}{{ s is iterable }}{{ i is iterable }}{{ d is iterable }}",
                   vars),
            "TrueFalseTrueFalseTrueFalseTrueTrueTrueFalseTrue");
  EXPECT_EQ(Render("{{ x is defined }}{{ x is undefined }}{{ i is defined }}{{ range is callable }}", vars),
            "FalseTrueTrueTrue");
}

TEST(Tests, ValueTests) {
  EXPECT_EQ(Render("{{ 3 is odd }}{{ 3 is even }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(4) }}{{ 2 is in [1, 2] }}"),
            "TrueFalseTrueFalseTrue");
  EXPECT_EQ(Render("{{ 1 is eq 1 }}{{ 1 is equalto 2 }}{{ 2 is gt 1 }}{{ 2 is lt 1 }}{{ 2 is ge 2 }}{{ 1 is ne 1 }}"),
            "TrueFalseTrueFalseTrueFalse");
  EXPECT_EQ(Render("{{ 'abc' is lower }}{{ 'aBc' is upper }}{{ none is sameas none }}{{ 'upper' is filter }}"),
            "TrueFalseTrueTrue");
  EXPECT_EQ(Render("{{ 1 is not none }} {{ none is not none }} {{ not x is defined }}"), "True False True");
}

TEST(Globals, RangeDictAndJoiner) {
  EXPECT_EQ(Render("{{ range(3) }} {{ range(1, 4) }} {{ range(10, 0, -3) }} {{ range(0) }}"),
            "[0, 1, 2] [1, 2, 3] [10, 7, 4, 1] []");
  EXPECT_EQ(Render("{{ dict(a=1, b='x') }} {{ dict() }}"), "{'a': 1, 'b': 'x'} {}");
  EXPECT_EQ(Render("{% set sep = joiner(' | ') %}{% for x in 'abc' %}{{ sep() }}{{ x }}{% endfor %}"), "a | b | c");
}

TEST(Globals, StrftimeNowFormatsTheCurrentDate) {
  std::string year = Render("{{ strftime_now('%Y') }}");
  ASSERT_EQ(year.size(), 4u);
  EXPECT_GE(std::stoi(year), 2024);
  EXPECT_EQ(Render("{{ strftime_now('%d %b %Y') | length }}"), "11");
}

}  // namespace
}  // namespace infernix::jinja::testing
