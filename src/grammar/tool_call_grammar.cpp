#include "grammar/tool_call_grammar.h"

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "grammar/compose.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"

namespace infernix::grammar {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kParameterClose = "</parameter>";
constexpr std::string_view kFunctionClose = "</function>";

// The JSON type names a schema admits: `type` (a name or a list) or its anyOf/oneOf alternatives'.
std::vector<std::string> TypesOf(const Json& schema) {
  std::vector<std::string> types;
  if (!schema.is_object()) return types;
  if (auto t = schema.find("type"); t != schema.end()) {
    if (t->is_string()) types.push_back(t->get<std::string>());
    if (t->is_array())
      for (const auto& n : *t)
        if (n.is_string()) types.push_back(n.get<std::string>());
    return types;
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    if (auto alts = schema.find(key); alts != schema.end() && alts->is_array())
      for (const auto& alt : *alts)
        for (auto& t : TypesOf(alt)) types.push_back(std::move(t));
  }
  return types;
}

bool Contains(const std::vector<std::string>& v, std::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// Free text the parser reads back whole as a string parameter: the parser ends a value at
// `</parameter>` (followed by a tag) or at `</function>` (followed by `</tool_call>`), so neither occurs.
Grammar FreeText() { return TextExcluding(std::vector<std::string_view>{kParameterClose, kFunctionClose}); }

// Raw choices for enum/const: nullopt when absent; throws when some value is not a string.
std::optional<Grammar> StringChoices(const Json& schema) {
  std::vector<std::string> values;
  if (auto c = schema.find("const"); c != schema.end()) {
    if (!c->is_string()) ThrowError(ErrorCode::kInvalidArgument, "/const: a non-string const needs a non-string type");
    values.push_back(c->get<std::string>());
  } else if (auto e = schema.find("enum"); e != schema.end()) {
    if (!e->is_array() || e->empty()) ThrowError(ErrorCode::kInvalidArgument, "/enum: expected a non-empty array");
    for (const auto& v : *e) {
      if (!v.is_string()) ThrowError(ErrorCode::kInvalidArgument, "/enum: non-string values need a non-string type");
      values.push_back(v.get<std::string>());
    }
  } else {
    return std::nullopt;
  }
  for (const auto& v : values)
    if (v.find(kParameterClose) != std::string::npos || v.find(kFunctionClose) != std::string::npos)
      ThrowError(ErrorCode::kInvalidArgument, "/enum: a value contains </parameter> or </function>");
  return ChoicesGrammar(values);
}

Grammar StringValue(const Json& schema) {
  if (auto choices = StringChoices(schema)) return *std::move(choices);
  if (schema.contains("format")) ThrowError(ErrorCode::kInvalidArgument, "/format: not enforced in XML tool calls");
  if (auto p = schema.find("pattern"); p != schema.end()) {
    if (!p->is_string()) ThrowError(ErrorCode::kInvalidArgument, "/pattern: must be a string");
    if (schema.contains("minLength") || schema.contains("maxLength"))
      ThrowError(ErrorCode::kInvalidArgument, "/pattern: cannot be combined with minLength/maxLength");
    try {
      return ParseRegex(AnchoredPattern(p->get<std::string>()));
    } catch (const Error& e) {
      ThrowError(ErrorCode::kInvalidArgument, "/pattern: unsupported pattern: {}", e.what());
    }
  }
  const Json* min = schema.contains("minLength") ? &schema["minLength"] : nullptr;
  const Json* max = schema.contains("maxLength") ? &schema["maxLength"] : nullptr;
  if (min == nullptr && max == nullptr) return FreeText();
  // Bounded: one line without `<` (so no closing tag), counted in code points.
  auto bound = [](const Json* v, const char* key) {
    if (!v->is_number_integer() || v->get<int64_t>() < 0 || v->get<int64_t>() > 10000)
      ThrowError(ErrorCode::kInvalidArgument, "/{}: expected an integer in [0, 10000]", key);
    return v->get<int64_t>();
  };
  const int64_t lo = min ? bound(min, "minLength") : 0;
  const std::string hi = max ? std::to_string(bound(max, "maxLength")) : "";
  if (max && lo > std::stoll(hi)) ThrowError(ErrorCode::kInvalidArgument, "/minLength: greater than maxLength");
  return ParseGbnf("root ::= [^<\\n]{" + std::to_string(lo) + "," + hi + "}");
}

bool IsStrict(const Json& tool) {
  auto flag = [](const Json& j) {
    auto it = j.find("strict");
    return it != j.end() && it->is_boolean() && it->get<bool>();
  };
  return flag(tool) || (tool.contains("function") && tool["function"].is_object() && flag(tool["function"]));
}

Grammar XmlArguments(const Json& params) {
  Grammar any_parameter = Concat({Literal("<parameter="), ParseGbnf("root ::= [^<>\\n]+"), Literal(">\n"), FreeText(),
                                  Literal("\n</parameter>\n")});
  if (!params.is_object()) ThrowError(ErrorCode::kInvalidArgument, ": the parameters must be a schema object");
  if (auto t = params.find("type"); t != params.end() && *t != "object")
    ThrowError(ErrorCode::kInvalidArgument, "/type: the parameters must be an object");
  const auto props = params.find("properties");
  if (props == params.end() || !props->is_object() || props->empty()) {
    if (params.contains("additionalProperties") && params["additionalProperties"] == false) return Literal("");
    return ZeroOrMore(any_parameter);
  }
  std::vector<std::string> required;
  if (auto r = params.find("required"); r != params.end() && r->is_array())
    for (const auto& n : *r) {
      if (!n.is_string() || !props->contains(n.get<std::string>()))
        ThrowError(ErrorCode::kInvalidArgument, "/required: names a parameter not in properties");
      required.push_back(n.get<std::string>());
    }
  std::vector<Grammar> parts;
  for (const auto& [name, schema] : props->items()) {
    if (name.empty() || name.find_first_of("<>\n") != std::string::npos)
      ThrowError(ErrorCode::kInvalidArgument, "/properties/{}: the name cannot be written in a <parameter=...> tag", name);
    Grammar value;
    try {
      value = XmlParameterValueGrammar(schema, params);
    } catch (const Error& e) {
      std::string what = e.what();
      if (what.rfind("JSON schema ", 0) == 0) what.erase(0, 12);
      ThrowError(ErrorCode::kInvalidArgument, "/properties/{}{}", name, what);
    }
    Grammar one = Concat({Literal("<parameter=" + name + ">\n"), value, Literal("\n</parameter>\n")});
    parts.push_back(Contains(required, name) ? std::move(one) : Optional(one));
  }
  return Concat(parts);
}

// Follows a parameter schema's local `$ref` (without a sibling `type`) within the parameters, as the
// output parser does (ParameterTypes); the schema itself when there is none.
const Json& Dereference(const Json& schema, const Json& root) {
  const Json* at = &schema;
  for (int depth = 0; depth < 5 && at->is_object() && at->contains("$ref") && !at->contains("type"); ++depth) {
    const Json& ref = (*at)["$ref"];
    if (!ref.is_string() || ref.get<std::string>().rfind('#', 0) != 0)
      ThrowError(ErrorCode::kInvalidArgument, "/$ref: only local references (#/...) are supported");
    try {
      at = &root.at(Json::json_pointer(ref.get<std::string>().substr(1)));
    } catch (const Json::exception&) {
      ThrowError(ErrorCode::kInvalidArgument, "/$ref: '{}' does not resolve within the parameters", ref.get<std::string>());
    }
  }
  return *at;
}

}  // namespace

Grammar XmlParameterValueGrammar(const Json& param_schema, const Json& root) {
  const Json& schema = Dereference(param_schema, root);
  if (schema.is_boolean() && schema.get<bool>()) return FreeText();
  if (!schema.is_object()) ThrowError(ErrorCode::kInvalidArgument, ": expected a schema object");
  const std::vector<std::string> types = TypesOf(schema);
  if (types.empty()) {
    if (auto choices = StringChoices(schema)) return *std::move(choices);
    for (const auto& [key, value] : schema.items()) {
      if (key == "description" || key == "title" || key == "examples" || key == "default" || key == "$comment")
        continue;
      ThrowError(ErrorCode::kInvalidArgument, "/{}: the output parser reads untyped values as strings", key);
    }
    return FreeText();
  }
  if (Contains(types, "string")) {
    // Alternatives with a string: free text covers them when none constrains further (Optional[str]).
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!schema.contains(key)) continue;
      for (const auto& alt : schema[key])
        for (const auto& [k, v] : alt.items())
          if (k != "type" && k != "description" && k != "title")
            ThrowError(ErrorCode::kInvalidArgument, "/{}: strings mixed with constrained alternatives", key);
      return FreeText();
    }
    return StringValue(schema);
  }
  // Not a string: the value is JSON text, parsed back by type. $refs resolve against the parameters.
  Json self = schema;
  for (const char* defs : {"$defs", "definitions"})
    if (root.is_object() && root.contains(defs) && !self.contains(defs)) self[defs] = root[defs];
  return JsonSchemaGrammar(self);
}

Grammar ToolCallGrammar(const Json& tools, ToolCallSyntax syntax) {
  if (!tools.is_array() || tools.empty()) ThrowError(ErrorCode::kInvalidArgument, "tools: expected a non-empty array");
  auto strict_error = [&](size_t i, const std::string& name, std::string what) {
    if (syntax == ToolCallSyntax::kXml && what.rfind("JSON schema", 0) != 0) what = "JSON schema " + what;
    ThrowError(ErrorCode::kInvalidArgument, "tools[{}] ({}): {}", i, name, what);
  };
  // Plan: every tool's name, and whether its parameters are within the limits, summed over all tools
  // (compile time grows with the total). A request over them is refused before any compile work.
  struct Plan {
    std::string name;
    const Json* params;
    bool strict = false, compile = true;  // compile false: any arguments (a non-strict tool over the limits)
  };
  static const Json kNoParameters = {{"type", "object"}};
  std::vector<Plan> plans;
  int64_t nodes = 0;
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& tool = tools[i];
    const Json& fn = tool.contains("function") ? tool["function"] : tool;
    if (!fn.is_object() || !fn.contains("name") || !fn["name"].is_string())
      ThrowError(ErrorCode::kInvalidArgument, "tools[{}]: no name", i);
    Plan plan{fn["name"].get<std::string>(), fn.contains("parameters") ? &fn["parameters"] : &kNoParameters,
              IsStrict(tool)};
    if (syntax == ToolCallSyntax::kXml && plan.name.find_first_of("<>\n") != std::string::npos)
      ThrowError(ErrorCode::kInvalidArgument, "tools[{}] ({}): the name cannot be written in a <function=...> tag", i,
                 plan.name);
    try {
      nodes += CheckSchemaLimits(*plan.params);
      if (nodes > kMaxSchemaNodes) {
        ThrowError(ErrorCode::kInvalidArgument,
                   "JSON schema: the tools' parameters have more than {} subschemas and enum values in all",
                   kMaxSchemaNodes);
      }
    } catch (const Error& e) {
      if (plan.strict) strict_error(i, plan.name, e.what());
      plan.compile = false;
    }
    plans.push_back(std::move(plan));
  }
  // Apply: each tool's call grammar.
  auto any_arguments = [&] {
    return syntax == ToolCallSyntax::kJson ? JsonSchemaGrammar(kNoParameters) : XmlArguments(Json::object());
  };
  std::vector<Grammar> calls;
  for (size_t i = 0; i < plans.size(); ++i) {
    const Plan& plan = plans[i];
    Grammar args;
    if (!plan.compile) {
      args = any_arguments();
    } else {
      try {
        args = syntax == ToolCallSyntax::kJson ? JsonSchemaGrammar(*plan.params) : XmlArguments(*plan.params);
      } catch (const Error& e) {
        if (plan.strict) strict_error(i, plan.name, e.what());
        args = any_arguments();
      }
    }
    if (syntax == ToolCallSyntax::kJson) {
      calls.push_back(Surround(args, "{\"name\": " + Json(plan.name).dump() + ", \"arguments\": ", "}\n</tool_call>"));
    } else {
      calls.push_back(Surround(args, "<function=" + plan.name + ">\n", "</function>\n</tool_call>"));
    }
  }
  return Union(calls);
}

}  // namespace infernix::grammar
