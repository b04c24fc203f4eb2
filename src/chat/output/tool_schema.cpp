#include "chat/output/tool_schema.h"

#include <algorithm>
#include <cctype>

#include "chat/output/text_scan.h"

namespace infernix {
namespace {

using Json = nlohmann::ordered_json;

const Json* Member(const Json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

std::string Lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

unsigned TypeBit(std::string_view name) {
  std::string type = Lower(name);
  if (type == "string" || type == "str" || type == "text") return kParamString;
  if (type == "integer" || type == "int" || type == "long") return kParamInteger;
  if (type == "number" || type == "float" || type == "double") return kParamNumber;
  if (type == "boolean" || type == "bool") return kParamBoolean;
  if (type == "object" || type == "dict") return kParamObject;
  if (type == "array" || type == "list") return kParamArray;
  if (type == "null") return kParamNull;
  return 0;
}

unsigned SchemaTypes(const Json& schema, int depth) {
  if (!schema.is_object() || depth > 4) return 0;
  unsigned types = 0;
  if (const Json* type = Member(schema, "type")) {
    if (type->is_string()) types |= TypeBit(type->get_ref<const std::string&>());
    if (type->is_array())
      for (const Json& t : *type)
        if (t.is_string()) types |= TypeBit(t.get_ref<const std::string&>());
  }
  for (const char* key : {"anyOf", "oneOf"})
    if (const Json* options = Member(schema, key); options && options->is_array())
      for (const Json& option : *options) types |= SchemaTypes(option, depth + 1);
  return types;
}

std::string_view Trim(std::string_view text) {
  while (!text.empty() && output::IsSpace(text.front())) text.remove_prefix(1);
  while (!text.empty() && output::IsSpace(text.back())) text.remove_suffix(1);
  return text;
}

}  // namespace

const Json* FindToolProperties(const Json& tools, std::string_view function) {
  if (!tools.is_array()) return nullptr;
  for (const Json& tool : tools) {
    const Json* def = Member(tool, "function");
    if (!def || !def->is_object()) def = &tool;
    const Json* name = Member(*def, "name");
    if (!name || !name->is_string() || name->get_ref<const std::string&>() != function) continue;
    const Json* parameters = Member(*def, "parameters");
    if (!parameters) parameters = Member(*def, "input_schema");
    const Json* properties = parameters ? Member(*parameters, "properties") : nullptr;
    return properties && properties->is_object() ? properties : nullptr;
  }
  return nullptr;
}

unsigned ParameterTypes(const Json* properties, std::string_view name) {
  const Json* schema = properties ? Member(*properties, name) : nullptr;
  return schema ? SchemaTypes(*schema, 0) : 0;
}

std::string ConvertParameterValue(std::string_view raw, unsigned types) {
  std::string_view text = Trim(raw);
  std::string lower = Lower(text);
  if ((types & kParamNull) && (lower == "null" || lower == "none")) return "null";
  if (types & (kParamInteger | kParamNumber | kParamObject | kParamArray)) {
    Json parsed = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!parsed.is_discarded() &&
        (((types & kParamInteger) && parsed.is_number_integer()) || ((types & kParamNumber) && parsed.is_number()) ||
         ((types & kParamObject) && parsed.is_object()) || ((types & kParamArray) && parsed.is_array())))
      return DumpJson(parsed);
  }
  if ((types & kParamBoolean) && (lower == "true" || lower == "false")) return lower;
  std::string out = "\"";
  output::AppendJsonEscaped(raw, &out);
  out += '"';
  return out;
}

std::string DumpJson(const Json& value) {
  return value.dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

}  // namespace infernix
