// Front ends besides GBNF: a list of choices, and a regular-expression subset (docs/grammar.md).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace infernix::grammar {

// A grammar matching exactly one of `choices` (UTF-8 strings; "" allowed). Throws
// Error(kInvalidArgument) for an empty list or a choice that is not valid UTF-8.
Grammar ChoicesGrammar(const std::vector<std::string>& choices);

// A grammar matching the whole output against `pattern` (ECMAScript-like syntax, always anchored at
// both ends; a leading ^ and a trailing $ are allowed and change nothing). Supported: literals,
// `.` (any character but \n and \r), classes [a-z] [^...] with \d \w \s inside, \d \D \w \W \s \S
// (ASCII, as in ECMAScript), escapes \n \r \t \f \v \0 \xHH \uHHHH \u{H...} and escaped
// metacharacters, groups ( ) and (?: ), alternation |, quantifiers * + ? {m} {m,} {m,n} (a lazy
// `?` suffix is accepted: it does not change the language). Back-references, lookaround and
// anchors elsewhere throw Error(kInvalidArgument) naming the column (1-based, in bytes).
Grammar ParseRegex(std::string_view pattern);

}  // namespace infernix::grammar
