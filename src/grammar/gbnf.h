// The GBNF front end: llama.cpp's grammar dialect (docs/grammar.md).
//
//   root   ::= object            # comments run to the end of the line
//   object ::= "{" ws ( pair ( "," ws pair )* )? "}"
//   name   ::= [a-zA-Z_] [a-zA-Z0-9_]{0,31}
//
// Rules `name ::= alternatives`; alternatives separated by `|`; sequences of string literals
// ("..."), character classes ([a-z], [^"\\], with ranges and negation), `.` (any character), rule
// references and parenthesized groups, each optionally followed by `*`, `+`, `?`, `{m}`, `{m,}` or
// `{m,n}`. Escapes in literals and classes: \n \r \t \\ \" \' \[ \] \- \/ \xHH \uHHHH \UHHHHHHHH.
#pragma once

#include <string_view>

#include "grammar/grammar.h"

namespace infernix::grammar {

// Parses GBNF text. Throws Error(kInvalidArgument) with "line L, column C" (1-based, columns in
// bytes) for syntax errors, undefined or redefined rules, a missing root rule and left recursion.
Grammar ParseGbnf(std::string_view text, std::string_view root = "root");

// GBNF for any JSON value (RFC 8259; whitespace between tokens, none around the value), the grammar
// of response_format json_object.
std::string_view JsonGbnf();

}  // namespace infernix::grammar
