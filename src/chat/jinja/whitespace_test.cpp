// Whitespace handling: trim_blocks, lstrip_blocks, `-` / `+` markers, comments, raw blocks and
// newline normalisation, as Jinja2 does them with transformers' settings.
#include "chat/jinja/test_util.h"

namespace infernix::jinja::testing {
namespace {

TEST(Whitespace, TrimBlocksDropsOneNewlineAfterABlockTag) {
  EXPECT_EQ(Render("{% if true %}\nyes\n{% endif %}\nafter"), "yes\nafter");
  EXPECT_EQ(Render("{% if true %}\n\nyes{% endif %}"), "\nyes");  // only the first newline
  EXPECT_EQ(Render("{% set x = 1 %}  \nkept"), "  \nkept");       // not when spaces come first
}

TEST(Whitespace, TrimBlocksDoesNotApplyToVariables) {
  EXPECT_EQ(Render("{{ 'a' }}\nb"), "a\nb");
}

TEST(Whitespace, LstripBlocksRemovesIndentationBeforeBlockTags) {
  EXPECT_EQ(Render("<ul>\n  {% for i in [1, 2] %}\n  <li>{{ i }}</li>\n  {% endfor %}\n</ul>"),
            "<ul>\n  <li>1</li>\n  <li>2</li>\n</ul>");
  EXPECT_EQ(Render("  \t{% if true %}x{% endif %}"), "x");  // at the very start too
}

TEST(Whitespace, LstripBlocksKeepsTextBeforeATagOnTheSameLine) {
  EXPECT_EQ(Render("a  {% if true %}b{% endif %}"), "a  b");
  EXPECT_EQ(Render("{{ 1 }}  {% if true %}a{% endif %}"), "1  a");
}

TEST(Whitespace, LstripBlocksDoesNotApplyToVariables) {
  EXPECT_EQ(Render("line\n    {{ 'x' }}"), "line\n    x");
}

TEST(Whitespace, PlusDisablesLstripAndTrim) {
  EXPECT_EQ(Render("  {%+ if true %}q{% endif %}"), "  q");
  EXPECT_EQ(Render("{% if true +%}\nq{% endif %}"), "\nq");
}

TEST(Whitespace, MinusStripsAllWhitespaceOnItsSide) {
  EXPECT_EQ(Render("a  \n\n  {%- if true %}b{% endif %}"), "ab");
  EXPECT_EQ(Render("{% if true -%}  \n\n  b{% endif %}"), "b");
  EXPECT_EQ(Render("a \n {{- 'b' -}} \n c"), "abc");
  EXPECT_EQ(Render("{%- if true -%}\n  x  \n{%- endif -%}\n"), "x");
}

TEST(Whitespace, QwenStyleTemplateLinesProduceNoStrayWhitespace) {
  std::string source =
      "{%- for m in messages %}\n"
      "    {%- if m.role == 'user' %}\n"
      "        {{- '<u>' + m.content + '</u>\\n' }}\n"
      "    {%- else %}\n"
      "        {{- '<a>' + m.content + '</a>\\n' }}\n"
      "    {%- endif %}\n"
      "{%- endfor %}\n";
  nlohmann::ordered_json vars = {{"messages", {{{"role", "user"}, {"content", "hi"}}, {{"role", "bot"}, {"content", "yo"}}}}};
  EXPECT_EQ(Render(source, vars), "<u>hi</u>\n<a>yo</a>\n");
}

TEST(Whitespace, CommentsAreRemovedWithBlockWhitespaceRules) {
  EXPECT_EQ(Render("a{# note #}b"), "ab");
  EXPECT_EQ(Render("a\n  {# note #}\nb"), "a\nb");        // lstrip and trim apply to comments
  EXPECT_EQ(Render("a  {# note #}\nb"), "a  b");          // not lstripped: text before it
  EXPECT_EQ(Render("a\n  {#- note -#}\n  b"), "ab");
  EXPECT_EQ(Render("{# {{ not rendered }} {% if %} #}x"), "x");
  EXPECT_EQ(Render("{# multi\nline\ncomment #}\ny"), "y");
}

TEST(Whitespace, RawBlocksKeepTheirContent) {
  EXPECT_EQ(Render("{% raw %}{{ x }} {% if %}{% endraw %}"), "{{ x }} {% if %}");
  EXPECT_EQ(Render("{% raw %}  {{ x }}{% endraw %}\nz"), "  {{ x }}z");
  EXPECT_EQ(Render("{%- raw -%}  a  {%- endraw -%}  b"), "ab");
}

TEST(Whitespace, OneTrailingNewlineOfTheTemplateIsDropped) {
  EXPECT_EQ(Render("a\n"), "a");
  EXPECT_EQ(Render("a\n\n"), "a\n");
  EXPECT_EQ(Render("{{ 'a' }}\n"), "a");
}

TEST(Whitespace, WindowsAndOldMacNewlinesBecomeLineFeeds) {
  EXPECT_EQ(Render("a\r\nb\rc"), "a\nb\nc");
  EXPECT_EQ(Render("{% if true %}\r\nx{% endif %}\r\n"), "x");
  EXPECT_EQ(Render("{{ 'p\r\nq' }}"), "p\nq");
}

TEST(Whitespace, TagsMayContainNewlinesAndBracesInStrings) {
  EXPECT_EQ(Render("{{\n  'a'\n  ~ 'b'\n}}"), "ab");
  EXPECT_EQ(Render("{{ '}}' }}{{ \"%}\" }}"), "}}%}");
  EXPECT_EQ(Render("{{ {'a': {'b': 1}} }}"), "{'a': {'b': 1}}");
  EXPECT_EQ(Render("{% set d = {'k': [1, {'x': 2}]} %}{{ d.k[1].x }}"), "2");
}

TEST(Whitespace, TextWithLoneBracesIsText) {
  EXPECT_EQ(Render("{ a } %} #} }}"), "{ a } %} #} }}");
  EXPECT_EQ(Render("{"), "{");
}

}  // namespace
}  // namespace infernix::jinja::testing
