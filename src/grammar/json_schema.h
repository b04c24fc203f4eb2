// The JSON Schema front end: a grammar of the JSON documents a schema accepts (docs/grammar.md).
//
// The subset covers OpenAI structured outputs and tool definitions: type (one or a list),
// properties/required/additionalProperties, enum, const, items, prefixItems, minItems/maxItems,
// anyOf/oneOf (as alternatives), allOf of one schema, local $ref (recursion allowed), string
// minLength/maxLength, format (date, time, date-time, uuid, email) and pattern, integer
// minimum/maximum/exclusiveMinimum/exclusiveMaximum (exact). Anything else that constrains
// values is refused; annotations (title, description, examples, default, $schema, $id, $comment,
// ...) are ignored.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "grammar/grammar.h"

namespace infernix::grammar {

// Limits on what a schema may ask of the compiler, checked before any grammar work (compile time
// grows with both; without them one request can hold a server worker for seconds to minutes).
// Depth: schemas inside schemas (properties, items, prefixItems, additionalProperties, anyOf/oneOf/
// allOf, $defs; a chain of $ref counts too), the root being level 1. Real schemas are shallow
// (OpenAI's structured outputs allow 10 levels), so 64 only refuses abuse.
inline constexpr int kMaxSchemaDepth = 64;
// Size: subschemas plus enum/const values. OpenAI allows 5,000 properties; compile time is linear in
// this count (8,000 flat properties: ~0.1 s to the first token's mask), so 8,192 leaves room for that.
inline constexpr int64_t kMaxSchemaNodes = 8192;

// Checks `schema` against kMaxSchemaDepth and kMaxSchemaNodes; returns its node count. Throws
// Error(kInvalidArgument) saying which limit and where. JsonSchemaToGbnf and JsonSchemaGrammar call it.
int64_t CheckSchemaLimits(const nlohmann::ordered_json& schema);

// GBNF text for the documents `schema` accepts (start symbol `root`). Properties appear in the
// schema's order; whitespace between tokens is bounded (`ws ::= [ \t\n\r]{0,32}`), none around the
// document. `pattern` keywords become placeholder rules `<name> ::= "\"" <name>_body "\""` whose
// body JsonSchemaGrammar fills in from the regex; the text alone leaves them as a dummy.
// Throws Error(kInvalidArgument) naming the JSON pointer of the offending keyword.
std::string JsonSchemaToGbnf(const nlohmann::ordered_json& schema);

// A JSON Schema `pattern` (an unanchored search) as a whole-string regex for ParseRegex: a side
// without `^` / `$` gets `.*`.
std::string AnchoredPattern(const std::string& pattern);

// The grammar of JsonSchemaToGbnf with `pattern` rules filled in from ParseRegex.
Grammar JsonSchemaGrammar(const nlohmann::ordered_json& schema);

}  // namespace infernix::grammar
