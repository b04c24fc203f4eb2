#include "chat/jinja/json.h"

#include <algorithm>
#include <cmath>

#include "chat/jinja/eval_error.h"
#include "chat/jinja/utf8.h"

namespace infernix::jinja {

namespace {

Value FromJsonAt(const nlohmann::ordered_json& json, int depth) {
  if (depth > kMaxValueDepth) ThrowEval("JSON nested deeper than {} levels is not supported", kMaxValueDepth);
  using Type = nlohmann::ordered_json::value_t;
  switch (json.type()) {
    case Type::null: return Value::None();
    case Type::boolean: return Value::Bool(json.get<bool>());
    case Type::number_integer: return Value::Int(json.get<int64_t>());
    case Type::number_unsigned: {
      uint64_t u = json.get<uint64_t>();
      return u <= static_cast<uint64_t>(INT64_MAX) ? Value::Int(static_cast<int64_t>(u))
                                                   : Value::Float(static_cast<double>(u));
    }
    case Type::number_float: return Value::Float(json.get<double>());
    case Type::string: return Value::String(json.get<std::string>());
    case Type::array: {
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(FromJsonAt(item, depth + 1));
      return Value::List(std::move(items));
    }
    case Type::object: {
      Value dict = Value::Dict();
      auto& entries = dict.dict().entries;
      entries.reserve(json.size());
      // JSON object keys are unique strings, so entries can be appended without lookups.
      for (const auto& [key, item] : json.items()) entries.emplace_back(Value::String(key), FromJsonAt(item, depth + 1));
      return dict;
    }
    default: ThrowEval("JSON value of type '{}' cannot be used in a template", json.type_name());
  }
}

void AppendJsonString(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  size_t length = 0;
  for (size_t pos = 0; pos < s.size(); pos += length) {
    char32_t cp = DecodeCodePoint(s, pos, &length);
    switch (cp) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (cp < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<uint32_t>(cp));
    } else if (ensure_ascii && cp >= 0x7F) {
      if (cp >= 0x10000) {
        char32_t v = cp - 0x10000;
        out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
      } else {
        out += fmt::format("\\u{:04x}", static_cast<uint32_t>(cp));
      }
    } else {
      out.append(s.substr(pos, length));
    }
  }
  out += '"';
}

std::string FloatToJson(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  return FormatFloat(d);
}

class JsonWriter {
 public:
  JsonWriter(const JsonDumpOptions& options, std::string& out) : options_(options), out_(out) {}

  void Write(const Value& v, int depth) {
    if (depth > kMaxValueDepth) ThrowEval("tojson: values nested deeper than {} levels", kMaxValueDepth);
    switch (v.kind()) {
      case Value::Kind::kNone: out_ += "null"; return;
      case Value::Kind::kBool: out_ += v.AsBool() ? "true" : "false"; return;
      case Value::Kind::kInt: out_ += std::to_string(v.AsInt()); return;
      case Value::Kind::kFloat: out_ += FloatToJson(v.AsFloat()); return;
      case Value::Kind::kString: AppendJsonString(out_, v.AsString(), options_.ensure_ascii); return;
      case Value::Kind::kList: WriteList(v.list().items, depth); return;
      case Value::Kind::kDict: WriteDict(v.dict(), depth); return;
      case Value::Kind::kUndefined: ThrowEval("tojson: an undefined value is not JSON serializable ({})", v.undefined().hint);
      default: ThrowEval("tojson: object of type '{}' is not JSON serializable", TypeName(v));
    }
  }

 private:
  // Opens a level: writes the first line break, returns the separator between items and the text
  // that closes the level.
  std::pair<std::string, std::string> Open(int depth) {
    if (!options_.indent) return {options_.item_separator, ""};
    std::string inner = "\n", outer = "\n";
    for (int i = 0; i <= depth; ++i) inner += *options_.indent;
    for (int i = 0; i < depth; ++i) outer += *options_.indent;
    out_ += inner;
    return {options_.item_separator + inner, outer};
  }

  void WriteList(const std::vector<Value>& items, int depth) {
    if (items.empty()) {
      out_ += "[]";
      return;
    }
    out_ += '[';
    auto [separator, close] = Open(depth);
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out_ += separator;
      Write(items[i], depth + 1);
    }
    out_ += close + "]";
  }

  void WriteDict(const DictObj& dict, int depth) {
    if (dict.entries.empty()) {
      out_ += "{}";
      return;
    }
    std::vector<const std::pair<Value, Value>*> entries;
    for (const auto& entry : dict.entries) entries.push_back(&entry);
    if (options_.sort_keys)
      std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return Compare(a->first, b->first) < 0; });
    out_ += '{';
    auto [separator, close] = Open(depth);
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i > 0) out_ += separator;
      WriteKey(entries[i]->first);
      out_ += options_.key_separator;
      Write(entries[i]->second, depth + 1);
    }
    out_ += close + "}";
  }

  // json.dumps converts None, bool, int and float keys to strings.
  void WriteKey(const Value& key) {
    switch (key.kind()) {
      case Value::Kind::kString: AppendJsonString(out_, key.AsString(), options_.ensure_ascii); return;
      case Value::Kind::kNone: out_ += "\"null\""; return;
      case Value::Kind::kBool: out_ += key.AsBool() ? "\"true\"" : "\"false\""; return;
      case Value::Kind::kInt: out_ += "\"" + std::to_string(key.AsInt()) + "\""; return;
      case Value::Kind::kFloat: out_ += "\"" + FloatToJson(key.AsFloat()) + "\""; return;
      default: ThrowEval("tojson: keys must be str, int, float, bool or None, not '{}'", TypeName(key));
    }
  }

  const JsonDumpOptions& options_;
  std::string& out_;
};

}  // namespace

Value FromJson(const nlohmann::ordered_json& json) { return FromJsonAt(json, 0); }

std::string ToJson(const Value& value, const JsonDumpOptions& options) {
  std::string out;
  JsonWriter(options, out).Write(value, 0);
  return out;
}

}  // namespace infernix::jinja
