#include "server/json_reader.h"

#include <fmt/format.h>

#include <unordered_map>
#include <utility>

namespace infernix {

namespace {

// nlohmann SAX events into an ordered_json, appending members without the ordered_map's search for an
// existing key; a per-object index of the keys (from kIndexFrom members on) finds repeated ones.
class OrderedBuilder {
 public:
  using Members = Json::object_t::Container;  // ordered_map's underlying vector of (key, value)

  bool null() { return Put(Json(nullptr)); }
  bool boolean(bool v) { return Put(Json(v)); }
  bool number_integer(Json::number_integer_t v) { return Put(Json(v)); }
  bool number_unsigned(Json::number_unsigned_t v) { return Put(Json(v)); }
  bool number_float(Json::number_float_t v, const std::string&) { return Put(Json(v)); }
  bool string(std::string& v) { return Put(Json(std::move(v))); }
  bool binary(Json::binary_t& v) { return Put(Json::binary(std::move(v))); }
  bool start_object(std::size_t) { return Open(Json::object()); }
  bool start_array(std::size_t) { return Open(Json::array()); }
  bool end_object() { return Close(); }
  bool end_array() { return Close(); }
  bool key(std::string& k) {
    Frame& f = stack_.back();
    Members& members = f.value->get_ref<Json::object_t&>();
    if (f.index.empty() && members.size() >= kIndexFrom)  // large enough to index its keys
      for (size_t i = 0; i < members.size(); ++i) f.index.emplace(members[i].first, i);
    size_t slot = members.size();  // a new member unless the key is there
    if (f.index.empty()) {
      for (size_t i = 0; i < members.size() && slot == members.size(); ++i)
        if (members[i].first == k) slot = i;
    } else if (auto [it, added] = f.index.try_emplace(k, slot); !added) {
      slot = it->second;
    }
    if (slot == members.size()) members.emplace_back(std::move(k), nullptr);
    f.member = &members[slot].second;
    return true;
  }
  // Rethrows the parser's exception with its own type (parse_error, out_of_range).
  template <class Exception>
  bool parse_error(std::size_t, const std::string&, const Exception& e) {
    throw e;
  }

  Json& root() { return root_; }

 private:
  static constexpr size_t kIndexFrom = 16;
  struct Frame {
    Json* value = nullptr;
    Json* member = nullptr;  // objects: where the value of the last key goes
    std::unordered_map<std::string, size_t> index;
  };

  Json* Place(Json&& v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Frame& f = stack_.back();
    if (f.value->is_array()) {
      Json::array_t& items = f.value->get_ref<Json::array_t&>();
      items.push_back(std::move(v));
      return &items.back();
    }
    *f.member = std::move(v);
    return f.member;
  }
  bool Put(Json&& v) {
    Place(std::move(v));
    return true;
  }
  bool Open(Json&& container) {
    // Each array or object is refused as it opens, before anything deeper is built.
    if (stack_.size() >= static_cast<size_t>(kMaxRequestDepth))
      BadRequest("", fmt::format("the request body nests arrays and objects deeper than {} levels", kMaxRequestDepth));
    Frame f;
    f.value = Place(std::move(container));
    stack_.push_back(std::move(f));
    return true;
  }
  bool Close() {
    stack_.pop_back();
    return true;
  }

  Json root_;
  std::vector<Frame> stack_;
};

}  // namespace

Json ParseOrderedJson(std::string_view text) {
  OrderedBuilder builder;
  Json::sax_parse(text, &builder);
  return std::move(builder.root());
}

Json ParseRequestBody(const std::string& body) {
  Json j;
  try {
    j = ParseOrderedJson(body);
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
