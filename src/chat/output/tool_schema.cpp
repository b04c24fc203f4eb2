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

// A local "$ref" ("#" or "#/a/b", JSON pointer escapes ~0 ~1) resolved within root, or nullptr.
const Json* Resolve(const Json* root, const Json& ref) {
  if (root == nullptr || !ref.is_string()) return nullptr;
  const std::string& text = ref.get_ref<const std::string&>();
  if (text.empty() || text[0] != '#') return nullptr;
  try {
    const Json& target = root->at(Json::json_pointer(text.substr(1)));
    return &target;
  } catch (const Json::exception&) {
    return nullptr;
  }
}

unsigned SchemaTypes(const Json& schema, int depth, const Json* root) {
  if (!schema.is_object() || depth > 4) return 0;
  if (const Json* ref = Member(schema, "$ref"); ref && !Member(schema, "type"))
    if (const Json* target = Resolve(root, *ref)) return SchemaTypes(*target, depth + 1, root);
  unsigned types = 0;
  if (const Json* type = Member(schema, "type")) {
    if (type->is_string()) types |= TypeBit(type->get_ref<const std::string&>());
    if (type->is_array())
      for (const Json& t : *type)
        if (t.is_string()) types |= TypeBit(t.get_ref<const std::string&>());
  }
  for (const char* key : {"anyOf", "oneOf"})
    if (const Json* options = Member(schema, key); options && options->is_array())
      for (const Json& option : *options) types |= SchemaTypes(option, depth + 1, root);
  return types;
}

std::string_view Trim(std::string_view text) {
  while (!text.empty() && output::IsSpace(text.front())) text.remove_prefix(1);
  while (!text.empty() && output::IsSpace(text.back())) text.remove_suffix(1);
  return text;
}

}  // namespace

const Json* FindToolParameters(const Json& tools, std::string_view function) {
  if (!tools.is_array()) return nullptr;
  for (const Json& tool : tools) {
    const Json* def = Member(tool, "function");
    if (!def || !def->is_object()) def = &tool;
    const Json* name = Member(*def, "name");
    if (!name || !name->is_string() || name->get_ref<const std::string&>() != function) continue;
    const Json* parameters = Member(*def, "parameters");
    if (!parameters) parameters = Member(*def, "input_schema");
    return parameters && parameters->is_object() ? parameters : nullptr;
  }
  return nullptr;
}

const Json* FindToolProperties(const Json& tools, std::string_view function) {
  const Json* parameters = FindToolParameters(tools, function);
  const Json* properties = parameters ? Member(*parameters, "properties") : nullptr;
  return properties && properties->is_object() ? properties : nullptr;
}

unsigned ParameterTypes(const Json* properties, std::string_view name, const Json* root) {
  const Json* schema = properties ? Member(*properties, name) : nullptr;
  return schema ? SchemaTypes(*schema, 0, root) : 0;
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
