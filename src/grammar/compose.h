// Combining grammars: literals, concatenation, optionals, unions, a grammar between literal text, and
// free text that excludes a string. Used to constrain a tool call to the model's call format with the
// tool's argument schema inside (tool_call_grammar.h).
#pragma once

#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace infernix::grammar {

// The language of `g` with `prefix` before and `suffix` after each string (UTF-8 literals).
Grammar Surround(const Grammar& g, std::string_view prefix, std::string_view suffix);

// The union of the grammars' languages (at least one grammar).
Grammar Union(const std::vector<Grammar>& grammars);

// Exactly `text` (UTF-8).
Grammar Literal(std::string_view text);

// The concatenation of the grammars' languages, in order (no grammars: the empty string).
Grammar Concat(const std::vector<Grammar>& parts);

// `g`'s language and the empty string.
Grammar Optional(const Grammar& g);

// Zero or more strings of `g`'s language, one after the other (`g` must not accept the empty string).
Grammar ZeroOrMore(const Grammar& g);

// Every string (any code points, the empty string included) that contains none of `stops` (each
// non-empty UTF-8). Built from the Aho-Corasick automaton of the stops: one rule per trie node that
// does not end a stop, so a matcher tracks which stop prefixes the text ends with. When a stop has
// no border (no proper prefix that is also a suffix, true of tags like `</parameter>`), text + stop
// contains that stop only at its end.
Grammar TextExcluding(const std::vector<std::string_view>& stops);
Grammar TextExcluding(std::string_view stop);

}  // namespace infernix::grammar
