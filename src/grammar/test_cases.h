// Grammars with strings each must accept and reject, shared by the character- and token-level
// matcher tests. Header-only, for *_test.cpp files.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "grammar/gbnf.h"
#include "grammar/regex.h"

namespace infernix::grammar::testing {

// One grammar, from GBNF, or a regex when `regex` is set, or choices when `choices` is non-empty.
struct GrammarCase {
  std::string name;
  std::string gbnf;
  std::vector<std::string> accept;
  std::vector<std::string> reject;
  std::string regex = {};
  std::vector<std::string> choices = {};
};

inline Grammar BuildGrammar(const GrammarCase& c) {
  if (!c.regex.empty()) return ParseRegex(c.regex);
  if (!c.choices.empty()) return ChoicesGrammar(c.choices);
  return ParseGbnf(c.gbnf);
}

inline std::vector<GrammarCase> GrammarCases() {
  return {
      {"literal", R"g(root ::= "hello world")g", {"hello world"}, {"hello", "hello world!", "Hello world", ""}},
      {"alternation", R"g(root ::= "yes" | "no" | "maybe so")g", {"yes", "no", "maybe so"}, {"ye", "yesno", "maybe", "n"}},
      {"class_ranges", R"g(root ::= [a-cx-z0-9_]+)g", {"abc", "x_9", "z", "a0b1"}, {"", "d", "abc-", "A"}},
      {"negated_class", R"g(root ::= "<" [^<>\n]* ">")g", {"<>", "<abc def>", "<é中😀>"}, {"<a<b>", "<a\nb>", "<abc", "abc>"}},
      {"any_char", R"g(root ::= "[" . . "]")g", {"[ab]", "[é😀]", "[\n\t]"}, {"[a]", "[abc]", "ab"}},
      {"optional", R"g(root ::= "-"? [0-9] ("." [0-9])?)g", {"1", "-1", "1.5", "-0.0"}, {"-", "1.", "1.55", "--1"}},
      {"repeat_counts", R"g(root ::= [a]{2} [b]{1,3} [c]{2,})g",
       {"aabcc", "aabbbccc", "aabbcccccc"}, {"abcc", "aabbbbcc", "aabc", "aacc"}},
      {"repeat_literal", R"g(root ::= "ab"* "c" ("xy"){0,2})g", {"c", "ababc", "cxy", "abcxyxy"}, {"abac", "cxyxyxy", "cx"}},
      {"recursion", R"g(
# balanced parentheses, nested
root ::= pair*
pair ::= "(" root ")")g",
       {"", "()", "(())()", "((()))(())"}, {"(", ")", "(()", "())("}},
      {"unicode_literals", R"g(root ::= "日本" [\u3040-\u309F]+ "\U0001F600"?)g", {"日本あい", "日本ん😀"}, {"日本", "日本a", "日本あ😁"}},
      {"escapes", R"g(root ::= "\"" [\x41-\x43\-]* "\\" "\t"?)g", {"\"\\", "\"A-C\\\t", "\"--\\"}, {"\"D\\", "\"A\\\n", "A"}},
      {"json", std::string(JsonGbnf()),
       {R"({"a": [1, 2.5, -3e10, true, null], "b": {"c": "d\"e\u00e9"}})", "[]", "{}", "\"\"", "0", "-0.25E+3",
        "[ {\"x\" : [ [ ] ] } , \"日本語\" ]", "false"},
       {"{", R"({"a" 1})", "01", "[1,]", "{\"a\":}", "tru", "\"\\x\"", "[1 2]", "{'a': 1}", "1.", "\"a\nb\""}},
      {"choices", "", {"red", "green", "blue", "blue-green", "", "日本"}, {"r", "gree", "blue-", "redd", "yellow"},
       "", {"red", "green", "blue", "blue-green", "", "日本"}},
      {"regex_date", "", {"2024-01-31", "1999-12-01"}, {"2024-1-31", "2024-01-311", "24-01-31", "2024/01/31"},
       R"(^\d{4}-\d{2}-\d{2}$)"},
      {"regex_email", "", {"ada@example.com", "a.b_c@x-y.org"}, {"ada@", "@x.com", "ada@example", "a b@x.com"},
       R"([\w.]+@[a-z\-]+(?:\.[a-z]{2,})+)"},
      {"regex_alternation", "", {"cat", "dog", "catdog", "dogs", "hotdog"}, {"", "cass", "do", "catdogs"},
       R"((cat|dog)(dog|s)?|hot(dog))"},
      {"regex_classes", "", {"ab1 ", "Z_9\t", "é.x", "x-y"}, {"ab", "\n..", "ab\n1"},
       R"([^\d\s][\w.-]*?[\dxy][\s]?)"},
      {"regex_unicode", "", {"π=3", "\u00e9", "😀😀", "\\."}, {"π", "😀", "\\", "\\x"}, R"(\u03c0=\d|\u00e9|\u{1F600}{2}|\\\.)"},
  };
}

inline GrammarCase CaseNamed(std::string_view name) {
  for (GrammarCase& c : GrammarCases()) {
    if (c.name == name) return c;
  }
  return {};
}

}  // namespace infernix::grammar::testing
