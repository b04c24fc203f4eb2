// Looks up a tool's parameter schemas in a request's `tools` array and converts the raw text values of
// XML-form tool calls (<parameter=name>value</parameter>) to JSON by the declared type. See
// docs/tool-calls.md for the rules. Never throws: a `tools` array of the wrong shape finds nothing.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace infernix {

// The JSON types a parameter schema admits, as bits.
enum ParameterType : unsigned {
  kParamString = 1u << 0,
  kParamInteger = 1u << 1,
  kParamNumber = 1u << 2,
  kParamBoolean = 1u << 3,
  kParamObject = 1u << 4,
  kParamArray = 1u << 5,
  kParamNull = 1u << 6,
};

// The `properties` object of the named function's parameters, or nullptr. Accepts the OpenAI shape
// ({type: function, function: {name, parameters}}), the flat one ({name, parameters}) and Anthropic's
// ({name, input_schema}).
const nlohmann::ordered_json* FindToolProperties(const nlohmann::ordered_json& tools, std::string_view function);

// The named function's parameters schema (`parameters` or `input_schema`), or nullptr.
const nlohmann::ordered_json* FindToolParameters(const nlohmann::ordered_json& tools, std::string_view function);

// The types the schema of parameter `name` declares ("type" as a string or a list, and the types of
// "anyOf"/"oneOf" alternatives; a local "$ref" like "#/$defs/x" is followed within `root`, the
// parameters schema, when given); 0 when the parameter or its type is unknown.
unsigned ParameterTypes(const nlohmann::ordered_json* properties, std::string_view name,
                        const nlohmann::ordered_json* root = nullptr);

// Whether a value of these types is a JSON string whatever its text (string, or nothing known), so it
// can be streamed before it is complete.
inline bool AlwaysString(unsigned types) { return types == 0 || types == kParamString; }

// The JSON text for a parameter's raw value: null when null is admitted and the value is null/None
// (any case); otherwise, when the types admit it, the value (trimmed) parsed as a JSON integer,
// number, object or array, or true/false (any case) as a boolean; otherwise the raw value as a string.
std::string ConvertParameterValue(std::string_view raw, unsigned types);

// Dumps compactly, keeping key order; invalid UTF-8 is replaced rather than thrown on.
std::string DumpJson(const nlohmann::ordered_json& value);

}  // namespace infernix
