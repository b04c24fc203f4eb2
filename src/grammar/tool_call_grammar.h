// Grammars of one tool call in the forms Qwen chat templates write (docs/grammar.md, "Tool calls"):
//
//   JSON (Qwen3):                {"name": "NAME", "arguments": ARGS}\n</tool_call>
//   XML (Qwen3-Coder, Qwen3.5):  <function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n...</function>\n</tool_call>
//
// Both start right after the template's opening `<tool_call>\n` and end with `</tool_call>`. The
// arguments follow each tool's parameter schema: in the JSON form ARGS is JsonSchemaGrammar of it;
// in the XML form the declared parameters come in the schema's order (required ones always,
// optional ones maybe) and each VALUE is written so that the output parser (src/chat/output,
// ConvertParameterValue) reads back a value of the declared type.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "grammar/grammar.h"

namespace infernix::grammar {

enum class ToolCallSyntax { kJson, kXml };

// One call to one of `tools` (an array of {type: function, function: {name, parameters, strict}} or
// {name, parameters}). A tool whose schema cannot be enforced in this syntax gets arguments of any
// shape, unless it is `strict`: then Error(kInvalidArgument) "tools[i] (NAME): <why>" (for schema
// errors the JSON pointer of the keyword). Throws for tools without a name.
Grammar ToolCallGrammar(const nlohmann::ordered_json& tools, ToolCallSyntax syntax);

// The XML form's grammar for one parameter's VALUE under `schema` (`root` resolves `$ref`s):
//   - enum/const of strings: exactly one of them, raw;
//   - a type admitting strings: free text without `</parameter>` (with minLength/maxLength: that
//     many characters, no newline; with pattern: the pattern, unanchored sides as in JSON Schema);
//   - other types (number, integer, boolean, null, object, array, their anyOf): the JSON value;
//   - no type at all and no other keyword: free text;
//   - a `$ref` without a sibling `type`: the schema it points to within `root` (as the parser reads it).
// Throws Error(kInvalidArgument) when the parser could not read the value back as the schema says
// (format, unresolvable $ref, non-string enums without a type, ...).
Grammar XmlParameterValueGrammar(const nlohmann::ordered_json& schema, const nlohmann::ordered_json& root);

}  // namespace infernix::grammar
