// Conversion between template values and JSON.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/jinja/value.h"

namespace infernix::jinja {

// Objects become dicts in their key order, arrays lists, integers int (unsigned beyond int64 become
// float). Throws EvalError beyond kMaxValueDepth levels of nesting.
Value FromJson(const nlohmann::ordered_json& json);

// Python's json.dumps options, with the defaults transformers' `tojson` filter uses.
struct JsonDumpOptions {
  std::optional<std::string> indent;  // none: one line; else each level is indented by this string
  std::string item_separator = ", ";  // json.dumps uses "," instead when indent is set
  std::string key_separator = ": ";
  bool ensure_ascii = false;
  bool sort_keys = false;
};

// json.dumps(value, ...): key order kept, non-ASCII kept unless ensure_ascii, control characters
// escaped (\n, \u0001), "/" not escaped, floats as Python repr (NaN / Infinity for non-finite).
// Throws EvalError for values JSON cannot represent (Undefined, callables, namespaces).
std::string ToJson(const Value& value, const JsonDumpOptions& options);

}  // namespace infernix::jinja
