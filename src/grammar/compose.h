// Combining grammars: a grammar between literal text, and the union of grammars. Used to constrain
// a tool call to the model's call format with the tool's argument schema inside.
#pragma once

#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace infernix::grammar {

// The language of `g` with `prefix` before and `suffix` after each string (UTF-8 literals).
Grammar Surround(const Grammar& g, std::string_view prefix, std::string_view suffix);

// The union of the grammars' languages (at least one grammar).
Grammar Union(const std::vector<Grammar>& grammars);

}  // namespace infernix::grammar
