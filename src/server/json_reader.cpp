#include "server/json_reader.h"

#include <fmt/format.h>

namespace infernix {

Json ParseRequestBody(const std::string& body) {
  // The parser reports each array or object as it opens, with the depth of its parent: refuse the
  // one past the limit before anything deeper is built.
  auto limit_depth = [](int depth, Json::parse_event_t event, Json&) {
    if ((event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) &&
        depth >= kMaxRequestDepth)
      BadRequest("", fmt::format("the request body nests arrays and objects deeper than {} levels", kMaxRequestDepth));
    return true;
  };
  Json j;
  try {
    j = Json::parse(body, limit_depth);
  } catch (const nlohmann::json::parse_error& e) {
    BadRequest("", fmt::format("malformed JSON in the request body at byte {}: {}", e.byte, e.what()));
  } catch (const nlohmann::json::out_of_range& e) {  // a number no double holds (1e999)
    BadRequest("", fmt::format("a number in the request body is out of range: {}", e.what()));
  }
  if (!j.is_object()) BadRequest("", "the request body must be a JSON object, got " + DescribeJsonType(j));
  return j;
}

std::string StringMember(const Json& obj, const char* key) {
  if (!obj.is_object()) return "";
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string DescribeJsonType(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::string: return "a string";
    case Json::value_t::array: return "an array";
    case Json::value_t::object: return "an object";
    case Json::value_t::number_float: return "a number";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "an integer";
    default: return "an unknown value";
  }
}

JsonReader::JsonReader(const Json& obj, std::string path) : obj_(obj), path_(std::move(path)) {}

bool JsonReader::Has(const char* key) const { return obj_.is_object() && obj_.contains(key) && !obj_[key].is_null(); }

const Json& JsonReader::Get(const char* key) const {
  static const Json kNull;  // immutable
  return Has(key) ? obj_[key] : kNull;
}

std::string JsonReader::Param(const char* key) const { return path_.empty() ? key : path_ + "." + key; }

void JsonReader::Fail(const char* key, const std::string& expected) const {
  std::string got = Has(key) ? DescribeJsonType(obj_[key]) : "nothing";
  BadRequest(Param(key), fmt::format("{}: expected {}, got {}", Param(key), expected, got));
}

std::string JsonReader::RequiredString(const char* key) const {
  if (!Has(key) || !obj_[key].is_string()) Fail(key, "a string");
  return obj_[key].get<std::string>();
}

std::optional<std::string> JsonReader::String(const char* key) const {
  if (!Has(key)) return std::nullopt;
  if (!obj_[key].is_string()) Fail(key, "a string");
  return obj_[key].get<std::string>();
}

std::optional<double> JsonReader::Number(const char* key, double min, double max) const {
  if (!Has(key)) return std::nullopt;
  if (!obj_[key].is_number()) Fail(key, fmt::format("a number in [{}, {}]", min, max));
  double v = obj_[key].get<double>();
  if (!(v >= min && v <= max))
    BadRequest(Param(key), fmt::format("{}: expected a number in [{}, {}], got {}", Param(key), min, max, v));
  return v;
}

std::optional<int64_t> JsonReader::Integer(const char* key, int64_t min, int64_t max) const {
  if (!Has(key)) return std::nullopt;
  const Json& v = obj_[key];
  int64_t x = 0;
  if (v.is_number_integer()) {
    x = v.get<int64_t>();
  } else if (v.is_number_float() && v.get<double>() == static_cast<double>(static_cast<int64_t>(v.get<double>()))) {
    x = static_cast<int64_t>(v.get<double>());
  } else {
    Fail(key, fmt::format("an integer in [{}, {}]", min, max));
  }
  if (x < min || x > max)
    BadRequest(Param(key), fmt::format("{}: expected an integer in [{}, {}], got {}", Param(key), min, max, x));
  return x;
}

std::optional<bool> JsonReader::Bool(const char* key) const {
  if (!Has(key)) return std::nullopt;
  if (!obj_[key].is_boolean()) Fail(key, "true or false");
  return obj_[key].get<bool>();
}

const Json& JsonReader::RequiredArray(const char* key) const {
  if (!Has(key) || !obj_[key].is_array()) Fail(key, "an array");
  return obj_[key];
}

const Json* JsonReader::Array(const char* key) const {
  if (!Has(key)) return nullptr;
  if (!obj_[key].is_array()) Fail(key, "an array");
  return &obj_[key];
}

const Json* JsonReader::Object(const char* key) const {
  if (!Has(key)) return nullptr;
  if (!obj_[key].is_object()) Fail(key, "an object");
  return &obj_[key];
}

std::vector<std::string> JsonReader::StringOrStrings(const char* key, size_t max_items) const {
  std::vector<std::string> out;
  if (!Has(key)) return out;
  const Json& v = obj_[key];
  if (v.is_string()) {
    out.push_back(v.get<std::string>());
  } else if (v.is_array()) {
    for (const auto& s : v) {
      if (!s.is_string()) Fail(key, "a string or an array of strings");
      out.push_back(s.get<std::string>());
    }
  } else {
    Fail(key, "a string or an array of strings");
  }
  if (out.size() > max_items)
    BadRequest(Param(key), fmt::format("{}: at most {} entries are allowed, got {}", Param(key), max_items, out.size()));
  return out;
}

}  // namespace infernix
