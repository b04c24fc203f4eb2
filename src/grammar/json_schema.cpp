#include "grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "base/error.h"
#include "grammar/gbnf.h"
#include "grammar/regex.h"

namespace infernix::grammar {
namespace {

using Json = nlohmann::ordered_json;

// Integer bounds are exact within +-kIntLimit; a missing bound stops there (18 digits).
constexpr uint64_t kIntLimit = 999999999999999999ULL;
constexpr int64_t kMaxCount = 10000;  // the GBNF front end's repetition limit

// Rules every schema grammar shares. Names use '_' so they never collide with the "<rule>-<n>"
// helpers of the GBNF front end.
constexpr std::string_view kCommonRules = R"(ws ::= [ \t\n\r]{0,32}
json_value ::= json_object | json_array | json_string | json_number | "true" | "false" | "null"
json_object ::= "{" ws ( json_member ( "," ws json_member )* )? "}"
json_member ::= json_string ws ":" ws json_value ws
json_array ::= "[" ws ( json_value ws ( "," ws json_value ws )* )? "]"
json_char ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
json_string ::= "\"" json_char* "\""
json_number ::= "-"? ( "0" | [1-9] [0-9]{0,15} ) ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?
json_integer ::= "-"? ( "0" | [1-9] [0-9]{0,17} )
json_boolean ::= "true" | "false"
json_null ::= "null"
fmt_date ::= [0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] )
fmt_time ::= ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" ( [0-5] [0-9] | "60" ) ( "." [0-9]{1,9} )? ( [Zz] | [-+] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )
fmt_hex ::= [0-9a-fA-F]
fmt_email_label ::= [a-zA-Z0-9] ( [a-zA-Z0-9\-]{0,61} [a-zA-Z0-9] )?
)";

const std::set<std::string, std::less<>>& AnnotationKeywords() {
  static const std::set<std::string, std::less<>> k = {
      "title",           "description", "examples", "default",   "$schema",    "$id",     "$comment",
      "$defs",           "definitions", "readOnly", "writeOnly", "deprecated", "$anchor", "contentMediaType",
      "contentEncoding", "strict"};
  return k;
}

// `s` as a GBNF string literal.
std::string Literal(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7F) {
      out += fmt::format("\\x{:02X}", u);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// A GBNF repetition suffix for [min, max] (max < 0: unbounded).
std::string Count(int64_t min, int64_t max) {
  if (max < 0) return fmt::format("{{{},}}", min);
  return fmt::format("{{{},{}}}", min, max);
}

// Decimal numbers of the same length n, lo..hi (digit strings, lo <= hi).
std::string SameLength(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return "";
  if (lo == hi) return Literal(lo);
  const size_t n = lo.size();
  if (lo == std::string(n, '0') && hi == std::string(n, '9')) return fmt::format("[0-9]{{{}}}", n);
  if (lo[0] == hi[0]) return Literal(lo.substr(0, 1)) + " " + SameLength(lo.substr(1), hi.substr(1));
  std::vector<std::string> alts;
  alts.push_back(Literal(lo.substr(0, 1)) + " " + SameLength(lo.substr(1), std::string(n - 1, '9')));
  if (lo[0] + 1 <= hi[0] - 1) {
    std::string mid = fmt::format("[{}-{}]", static_cast<char>(lo[0] + 1), static_cast<char>(hi[0] - 1));
    if (n > 1) mid += fmt::format(" [0-9]{{{}}}", n - 1);
    alts.push_back(mid);
  }
  alts.push_back(Literal(hi.substr(0, 1)) + " " + SameLength(std::string(n - 1, '0'), hi.substr(1)));
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : " ") + alts[i];
  return out + " )";
}

// The decimal numbers lo..hi without leading zeros, as alternatives (lo <= hi).
std::vector<std::string> UnsignedRange(uint64_t lo, uint64_t hi) {
  std::vector<std::string> alts;
  uint64_t first = 0;
  uint64_t last = 9;
  for (size_t len = 1; len <= 19 && first <= hi; ++len) {
    const uint64_t a = std::max(lo, first);
    const uint64_t b = std::min(hi, last);
    if (a <= b) alts.push_back(SameLength(std::to_string(a), std::to_string(b)));
    first = last + 1;
    last = last * 10 + 9;
  }
  return alts;
}

// A JSON pointer short enough for an error message.
std::string ShortPointer(const std::string& ptr) {
  if (ptr.empty()) return "(root)";
  return ptr.size() <= 120 ? ptr : ptr.substr(0, 120) + "...";
}

// The walk behind CheckSchemaLimits: `schema` at `ptr`, `depth` levels deep (root: 1).
void WalkLimits(const Json& schema, const std::string& ptr, int depth, int64_t* nodes) {
  if (depth > kMaxSchemaDepth) {
    ThrowError(ErrorCode::kInvalidArgument, "JSON schema {}: nested deeper than {} levels (schemas inside schemas)",
               ShortPointer(ptr), kMaxSchemaDepth);
  }
  if (++*nodes > kMaxSchemaNodes) {
    ThrowError(ErrorCode::kInvalidArgument,
               "JSON schema: more than {} subschemas and enum values in all (at {}); simplify the schema",
               kMaxSchemaNodes, ShortPointer(ptr));
  }
  if (!schema.is_object()) return;
  for (const auto& [key, value] : schema.items()) {
    const std::string at = ptr + "/" + key;
    if (key == "enum" && value.is_array()) {
      *nodes += static_cast<int64_t>(value.size());  // checked at the next schema, or below
    } else if (key == "properties" || key == "$defs" || key == "definitions" || key == "patternProperties") {
      if (value.is_object())
        for (const auto& [name, sub] : value.items()) WalkLimits(sub, at + "/" + name, depth + 1, nodes);
    } else if (key == "anyOf" || key == "oneOf" || key == "allOf" || key == "prefixItems" ||
               (key == "items" && value.is_array())) {
      if (value.is_array())
        for (size_t i = 0; i < value.size(); ++i) WalkLimits(value[i], fmt::format("{}/{}", at, i), depth + 1, nodes);
    } else if (key == "items" || key == "additionalProperties" || key == "not" || key == "contains") {
      WalkLimits(value, at, depth + 1, nodes);
    }
  }
  if (*nodes > kMaxSchemaNodes) {
    ThrowError(ErrorCode::kInvalidArgument,
               "JSON schema: more than {} subschemas and enum values in all (at {}); simplify the schema",
               kMaxSchemaNodes, ShortPointer(ptr));
  }
}

class Converter {
 public:
  explicit Converter(const Json& root) : root_(root) {}

  std::string Convert() {
    Visit(root_, "", "root");
    std::string out;
    for (const auto& [name, text] : rules_) out += name + " ::= " + text + "\n";
    out += kCommonRules;
    return out;
  }

  // (placeholder body rule, regex, pointer of the pattern keyword)
  const std::vector<std::tuple<std::string, std::string, std::string>>& patterns() const { return patterns_; }

 private:
  [[noreturn]] static void Fail(const std::string& ptr, const std::string& what) {
    ThrowError(ErrorCode::kInvalidArgument, "JSON schema {}: {}", ptr.empty() ? "(root)" : ptr, what);
  }

  // A fresh rule name derived from `hint` (only [a-zA-Z0-9_]).
  std::string NewName(const std::string& hint) {
    std::string base;
    for (const char c : hint) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
      base += ok ? c : '_';
      if (base.size() >= 40) break;
    }
    if (base.empty()) base = "s";
    if (base == "root" && !used_names_.count(base)) {
      used_names_.insert(base);
      return base;
    }
    std::string name = "s_" + base;
    for (int n = 1; used_names_.count(name); ++n) name = fmt::format("s_{}_{}", base, n);
    used_names_.insert(name);
    return name;
  }

  // Defines a rule for the schema at `ptr` and returns its name.
  std::string Visit(const Json& schema, const std::string& ptr, const std::string& hint) {
    return Define(NewName(hint), schema, ptr);
  }
  // Defines rule `name` (named before its body is built, so recursive references find it).
  std::string Define(const std::string& name, const Json& schema, const std::string& ptr) {
    // CheckSchemaLimits bounds plain nesting; this also bounds chains of $ref (each adds a level).
    if (depth_ >= kMaxSchemaDepth) {
      ThrowError(ErrorCode::kInvalidArgument,
                 "JSON schema {}: nested deeper than {} levels (schemas inside schemas, $ref chains included)",
                 ShortPointer(ptr), kMaxSchemaDepth);
    }
    ++depth_;
    rules_.emplace_back(name, "");
    const size_t index = rules_.size() - 1;
    std::string body = Body(schema, ptr, name);
    rules_[index].second = std::move(body);
    --depth_;
    return name;
  }

  static std::string Join(const std::vector<std::string>& alts) {
    std::string out;
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return out;
  }

  int64_t CountKeyword(const Json& schema, const std::string& ptr, const char* key) {
    const Json& v = schema.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() < 0) Fail(ptr + "/" + key, "must be a non-negative integer");
    if (v.get<int64_t>() > kMaxCount) Fail(ptr + "/" + key, fmt::format("more than {} is not supported", kMaxCount));
    return v.get<int64_t>();
  }

  // The GBNF alternatives (one string) for the schema at `ptr`; `name` is its rule's name.
  std::string Body(const Json& schema, const std::string& ptr, const std::string& name) {
    if (schema.is_boolean()) {
      if (!schema.get<bool>()) Fail(ptr, "the schema `false` matches nothing");
      return "json_value";
    }
    if (!schema.is_object()) Fail(ptr, "a schema must be an object or a boolean");
    std::set<std::string, std::less<>> used;
    auto mark = [&](const char* k) { used.insert(k); };
    std::string body;

    if (schema.contains("$ref")) {
      mark("$ref");
      body = Ref(schema.at("$ref"), ptr + "/$ref");
    } else if (schema.contains("anyOf") || schema.contains("oneOf") || schema.contains("allOf")) {
      const char* key = schema.contains("anyOf") ? "anyOf" : schema.contains("oneOf") ? "oneOf" : "allOf";
      mark(key);
      const Json& list = schema.at(key);
      if (!list.is_array() || list.empty()) Fail(ptr + "/" + key, "must be a non-empty array of schemas");
      if (std::string_view(key) == "allOf" && list.size() != 1) {
        Fail(ptr + "/allOf", "allOf with more than one schema is not supported");
      }
      std::vector<std::string> alts;
      for (size_t i = 0; i < list.size(); ++i) {
        alts.push_back(Visit(list[i], fmt::format("{}/{}/{}", ptr, key, i), fmt::format("{}_{}", name, i)));
      }
      body = Join(alts);
    } else if (schema.contains("const")) {
      mark("const");
      mark("type");
      body = Literal(schema.at("const").dump());
    } else if (schema.contains("enum")) {
      mark("enum");
      mark("type");
      const Json& list = schema.at("enum");
      if (!list.is_array() || list.empty()) Fail(ptr + "/enum", "must be a non-empty array");
      std::vector<std::string> alts;
      for (const Json& v : list) alts.push_back(Literal(v.dump()));
      body = Join(alts);
    } else {
      std::vector<std::string> types;
      if (schema.contains("type")) {
        mark("type");
        const Json& t = schema.at("type");
        if (t.is_string()) {
          types.push_back(t.get<std::string>());
        } else if (t.is_array() && !t.empty()) {
          for (const Json& e : t) {
            if (!e.is_string()) Fail(ptr + "/type", "must be a type name or a list of them");
            types.push_back(e.get<std::string>());
          }
        } else {
          Fail(ptr + "/type", "must be a type name or a non-empty list of them");
        }
      } else if (schema.contains("properties") || schema.contains("additionalProperties") ||
                 schema.contains("required")) {
        types.push_back("object");
      } else if (schema.contains("items") || schema.contains("prefixItems")) {
        types.push_back("array");
      }
      if (types.empty()) {
        body = "json_value";
      } else {
        std::vector<std::string> alts;
        for (const std::string& t : types) alts.push_back(Typed(schema, ptr, name, t, &used));
        body = Join(alts);
      }
    }

    for (const auto& [key, value] : schema.items()) {
      if (used.count(key) || AnnotationKeywords().count(key)) continue;
      Fail(ptr + "/" + key,
           "unsupported keyword here (not implemented, or not applicable to the schema's type "
           "or combined with $ref/anyOf/oneOf/enum/const)");
    }
    return body;
  }

  std::string Ref(const Json& ref, const std::string& ptr) {
    if (!ref.is_string()) Fail(ptr, "must be a string");
    const std::string target = ref.get<std::string>();
    if (target != "#" && target.rfind("#/", 0) != 0) {
      Fail(ptr,
           "only local references (\"#\" or \"#/...\", e.g. \"#/$defs/name\") are supported, not '" + target + "'");
    }
    const std::string pointer = target.substr(1);
    if (const auto it = refs_.find(pointer); it != refs_.end()) return it->second;
    const Json* resolved = nullptr;
    try {
      const Json::json_pointer jp(pointer);
      if (root_.contains(jp)) resolved = &root_.at(jp);
    } catch (const nlohmann::json::exception&) {
      Fail(ptr, "'" + target + "' is not a valid JSON pointer");
    }
    if (resolved == nullptr) Fail(ptr, "'" + target + "' does not resolve to anything in the schema");
    const std::string name = NewName(pointer);
    refs_[pointer] = name;
    return Define(name, *resolved, pointer);
  }

  std::string Typed(const Json& schema, const std::string& ptr, const std::string& name, const std::string& type,
                    std::set<std::string, std::less<>>* used) {
    if (type == "null") return "json_null";
    if (type == "boolean") return "json_boolean";
    if (type == "number") return "json_number";
    if (type == "integer") return Integer(schema, ptr, used);
    if (type == "string") return String(schema, ptr, name, used);
    if (type == "object") return Object(schema, ptr, name, used);
    if (type == "array") return Array(schema, ptr, name, used);
    Fail(ptr + "/type", "unknown type '" + type + "'");
  }

  std::string Integer(const Json& schema, const std::string& ptr, std::set<std::string, std::less<>>* used) {
    int64_t lo = -static_cast<int64_t>(kIntLimit);
    int64_t hi = static_cast<int64_t>(kIntLimit);
    bool bounded = false;
    for (const char* key : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
      if (!schema.contains(key)) continue;
      used->insert(key);
      bounded = true;
      const Json& v = schema.at(key);
      if (!v.is_number()) Fail(ptr + "/" + key, "must be a number");
      const double d = v.get<double>();
      if (d < -static_cast<double>(kIntLimit) || d > static_cast<double>(kIntLimit)) {
        Fail(ptr + "/" + key, "integer bounds beyond +-999999999999999999 are not supported");
      }
      const std::string_view k = key;
      const bool lower = k == "minimum" || k == "exclusiveMinimum";
      const bool exclusive = k.rfind("exclusive", 0) == 0;
      int64_t b = 0;
      if (v.is_number_integer()) {
        b = v.get<int64_t>();
        if (exclusive) b += lower ? 1 : -1;
      } else {
        // The smallest integer above (or largest below) a fractional bound.
        b = static_cast<int64_t>(lower ? std::ceil(d) : std::floor(d));
        if (exclusive && static_cast<double>(b) == d) b += lower ? 1 : -1;
      }
      if (lower)
        lo = std::max(lo, b);
      else
        hi = std::min(hi, b);
    }
    if (!bounded) return "json_integer";
    if (lo > hi) Fail(ptr, fmt::format("no integer satisfies the bounds (minimum {} > maximum {})", lo, hi));
    std::vector<std::string> alts;
    if (lo < 0) {
      const uint64_t mag_lo = hi < 0 ? static_cast<uint64_t>(-hi) : 1;
      for (const std::string& a : UnsignedRange(mag_lo, static_cast<uint64_t>(-lo))) alts.push_back("\"-\" " + a);
    }
    if (hi >= 0) {
      for (const std::string& a :
           UnsignedRange(static_cast<uint64_t>(std::max<int64_t>(lo, 0)), static_cast<uint64_t>(hi))) {
        alts.push_back(a);
      }
    }
    return "( " + Join(alts) + " )";
  }

  std::string String(const Json& schema, const std::string& ptr, const std::string& name,
                     std::set<std::string, std::less<>>* used) {
    const bool has_len = schema.contains("minLength") || schema.contains("maxLength");
    if (schema.contains("format")) {
      used->insert("format");
      const Json& f = schema.at("format");
      if (!f.is_string()) Fail(ptr + "/format", "must be a string");
      if (has_len || schema.contains("pattern"))
        Fail(ptr + "/format", "cannot be combined with minLength/maxLength/pattern");
      const std::string format = f.get<std::string>();
      std::string inner;
      if (format == "date")
        inner = "fmt_date";
      else if (format == "time")
        inner = "fmt_time";
      else if (format == "date-time")
        inner = "fmt_date [Tt] fmt_time";
      else if (format == "uuid")
        inner = "fmt_hex{8} \"-\" fmt_hex{4} \"-\" fmt_hex{4} \"-\" fmt_hex{4} \"-\" fmt_hex{12}";
      else if (format == "email")
        inner = "[a-zA-Z0-9._%+\\-]{1,64} \"@\" fmt_email_label ( \".\" fmt_email_label ){1,8}";
      else
        Fail(ptr + "/format", "unsupported format '" + format + "' (supported: date, time, date-time, uuid, email)");
      return "\"\\\"\" " + inner + " \"\\\"\"";
    }
    if (schema.contains("pattern")) {
      used->insert("pattern");
      const Json& p = schema.at("pattern");
      if (!p.is_string()) Fail(ptr + "/pattern", "must be a string");
      if (has_len) Fail(ptr + "/pattern", "cannot be combined with minLength/maxLength");
      const std::string body = NewName(name + "_pattern");
      rules_.emplace_back(body, "\"x\"");  // filled in by JsonSchemaGrammar
      patterns_.emplace_back(body, p.get<std::string>(), ptr + "/pattern");
      return "\"\\\"\" " + body + " \"\\\"\"";
    }
    if (!has_len) return "json_string";
    int64_t min = 0;
    int64_t max = -1;
    if (schema.contains("minLength")) {
      used->insert("minLength");
      min = CountKeyword(schema, ptr, "minLength");
    }
    if (schema.contains("maxLength")) {
      used->insert("maxLength");
      max = CountKeyword(schema, ptr, "maxLength");
      if (max < min) Fail(ptr + "/maxLength", "is less than minLength");
    }
    return "\"\\\"\" json_char" + Count(min, max) + " \"\\\"\"";
  }

  std::string Object(const Json& schema, const std::string& ptr, const std::string& name,
                     std::set<std::string, std::less<>>* used) {
    // The declared properties in order: (key literal rule text, required).
    std::vector<std::pair<std::string, bool>> props;
    std::set<std::string> required;
    if (schema.contains("required")) {
      used->insert("required");
      const Json& r = schema.at("required");
      if (!r.is_array()) Fail(ptr + "/required", "must be an array of property names");
      for (const Json& e : r) {
        if (!e.is_string()) Fail(ptr + "/required", "must be an array of property names");
        required.insert(e.get<std::string>());
      }
    }
    if (schema.contains("properties")) {
      used->insert("properties");
      const Json& p = schema.at("properties");
      if (!p.is_object()) Fail(ptr + "/properties", "must be an object");
      for (const auto& [key, sub] : p.items()) {
        const std::string sub_ptr = ptr + "/properties/" + Escape(key);
        const std::string value = Visit(sub, sub_ptr, name + "_" + key);
        const std::string kv = Literal(Json(key).dump()) + " ws \":\" ws " + value + " ws";
        props.emplace_back(kv, required.count(key) > 0);
        required.erase(key);
      }
    }
    if (!required.empty()) {
      Fail(ptr + "/required", "names '" + *required.begin() + "', which is not in 'properties' (not supported)");
    }
    // Extra properties: absent or true: any string key with any value; false: none; a schema: its values.
    std::string extra;
    if (schema.contains("additionalProperties")) {
      used->insert("additionalProperties");
      const Json& a = schema.at("additionalProperties");
      if (a.is_boolean()) {
        if (a.get<bool>()) extra = "json_member";
      } else {
        const std::string value = Visit(a, ptr + "/additionalProperties", name + "_additional");
        extra = "json_string ws \":\" ws " + value + " ws";
      }
    } else {
      extra = "json_member";
    }
    // start_i: the first emitted member is property i or later; tail_i: members after one was emitted.
    const size_t n = props.size();
    std::vector<std::string> start(n + 1), tail(n + 1);
    for (size_t i = 0; i <= n; ++i) {
      start[i] = NewName(fmt::format("{}_start{}", name, i));
      tail[i] = NewName(fmt::format("{}_tail{}", name, i));
    }
    rules_.emplace_back(start[n], extra.empty() ? "\"\"" : "( ( " + extra + " ) ( \",\" ws " + extra + " )* )?");
    rules_.emplace_back(tail[n], extra.empty() ? "\"\"" : "( \",\" ws " + extra + " )*");
    for (size_t i = n; i-- > 0;) {
      const auto& [kv, req] = props[i];
      rules_.emplace_back(start[i], kv + " " + tail[i + 1] + (req ? "" : " | " + start[i + 1]));
      rules_.emplace_back(tail[i],
                          req ? "\",\" ws " + kv + " " + tail[i + 1] : "( \",\" ws " + kv + " )? " + tail[i + 1]);
    }
    return "\"{\" ws " + start[0] + " \"}\"";
  }

  std::string Array(const Json& schema, const std::string& ptr, const std::string& name,
                    std::set<std::string, std::less<>>* used) {
    std::vector<std::string> prefix;
    if (schema.contains("prefixItems")) {
      used->insert("prefixItems");
      const Json& p = schema.at("prefixItems");
      if (!p.is_array()) Fail(ptr + "/prefixItems", "must be an array of schemas");
      for (size_t i = 0; i < p.size(); ++i) {
        prefix.push_back(Visit(p[i], fmt::format("{}/prefixItems/{}", ptr, i), fmt::format("{}_item{}", name, i)) +
                         " ws");
      }
    }
    std::string item = "json_value ws";  // empty: no items after the prefix
    if (schema.contains("items")) {
      used->insert("items");
      const Json& it = schema.at("items");
      if (it.is_boolean() && !it.get<bool>())
        item.clear();
      else
        item = Visit(it, ptr + "/items", name + "_item") + " ws";
    }
    int64_t min = 0;
    int64_t max = -1;
    if (schema.contains("minItems")) {
      used->insert("minItems");
      min = CountKeyword(schema, ptr, "minItems");
    }
    if (schema.contains("maxItems")) {
      used->insert("maxItems");
      max = CountKeyword(schema, ptr, "maxItems");
      if (max < min) Fail(ptr + "/maxItems", "is less than minItems");
    }
    const auto k = static_cast<int64_t>(prefix.size());
    if (item.empty()) max = max < 0 ? k : std::min(max, k);
    if (min > max && max >= 0) Fail(ptr + "/minItems", "more items are required than the schema allows");
    // rest_i: the elements from index i on, i elements having been emitted.
    std::string next;  // rest_k
    {
      const int64_t more_min = std::max<int64_t>(min - k, 0);
      const int64_t more_max = max < 0 ? -1 : max - k;
      if (more_max == 0 || item.empty()) {
        next = "\"\"";
      } else if (k > 0) {
        next = "( \",\" ws " + item + " )" + Count(more_min, more_max);
      } else if (more_min == 0) {
        next = "( " + item + " ( \",\" ws " + item + " )" + Count(0, more_max < 0 ? -1 : more_max - 1) + " )?";
      } else {
        next = item + " ( \",\" ws " + item + " )" + Count(more_min - 1, more_max < 0 ? -1 : more_max - 1);
      }
    }
    for (int64_t i = k; i-- > 0;) {
      const std::string rest = NewName(fmt::format("{}_rest{}", name, i + 1));
      rules_.emplace_back(rest, next);
      std::string alt = (i > 0 ? "\",\" ws " : "") + prefix[static_cast<size_t>(i)] + " " + rest;
      if (max >= 0 && i >= max) alt.clear();
      if (alt.empty())
        next = "\"\"";
      else
        next = i >= min ? "( " + alt + " )?" : alt;
    }
    return "\"[\" ws " + next + " \"]\"";
  }

  static std::string Escape(const std::string& key) {
    std::string out;
    for (const char c : key) {
      if (c == '~')
        out += "~0";
      else if (c == '/')
        out += "~1";
      else
        out += c;
    }
    return out;
  }

  const Json& root_;
  int depth_ = 0;  // Define calls in progress
  std::vector<std::pair<std::string, std::string>> rules_;  // in definition order; root first
  std::set<std::string> used_names_;
  std::map<std::string, std::string> refs_;  // JSON pointer -> rule name
  std::vector<std::tuple<std::string, std::string, std::string>> patterns_;
};

// `cls` without the characters a JSON string cannot hold unescaped (controls, '"', '\').
CharClass StringSafe(const CharClass& cls) {
  static const CharRange kAllowed[] = {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, kMaxCodePoint}};
  std::vector<CharRange> out;
  for (const CharRange& r : cls) {
    for (const CharRange& a : kAllowed) {
      const char32_t lo = std::max(r.lo, a.lo);
      const char32_t hi = std::min(r.hi, a.hi);
      if (lo <= hi) out.push_back({lo, hi});
    }
  }
  return MakeCharClass(std::move(out), false);
}

}  // namespace

std::string AnchoredPattern(const std::string& pattern) {
  std::string p = pattern;
  const bool start = !p.empty() && p[0] == '^';
  if (start) p.erase(0, 1);
  size_t backslashes = 0;
  for (size_t i = p.size(); i >= 2 && p[i - 2] == '\\'; --i) ++backslashes;
  const bool end = !p.empty() && p.back() == '$' && backslashes % 2 == 0;
  if (end) p.pop_back();
  return (start ? "" : ".*") + std::string("(?:") + p + ")" + (end ? "" : ".*");
}


int64_t CheckSchemaLimits(const nlohmann::ordered_json& schema) {
  int64_t nodes = 0;
  WalkLimits(schema, "", 1, &nodes);
  return nodes;
}

std::string JsonSchemaToGbnf(const nlohmann::ordered_json& schema) {
  CheckSchemaLimits(schema);
  return Converter(schema).Convert();
}

Grammar JsonSchemaGrammar(const nlohmann::ordered_json& schema) {
  CheckSchemaLimits(schema);
  Converter converter(schema);
  const std::string text = converter.Convert();
  Grammar g;
  try {
    g = ParseGbnf(text);
  } catch (const Error& e) {
    // A $ref cycle that consumes nothing (e.g. a: {$ref: a}) is left recursion; anything else is a bug here.
    if (std::string_view(e.what()).find("left-recursive") == std::string_view::npos) throw;
    ThrowError(ErrorCode::kInvalidArgument, "JSON schema: a $ref cycle that matches no text first ({})", e.what());
  }
  for (const auto& [body, pattern, ptr] : converter.patterns()) {
    Grammar re;
    try {
      re = ParseRegex(AnchoredPattern(pattern));
    } catch (const Error& e) {
      ThrowError(ErrorCode::kInvalidArgument, "JSON schema {}: unsupported pattern: {}", ptr, e.what());
    }
    const auto rule_off = static_cast<uint32_t>(g.rules.size());
    const auto class_off = static_cast<uint32_t>(g.classes.size());
    for (const CharClass& cls : re.classes) g.classes.push_back(StringSafe(cls));
    for (Rule& rule : re.rules) {
      for (Sequence& seq : rule.alternatives) {
        for (Element& e : seq) e.index += e.kind == Element::Kind::kRule ? rule_off : class_off;
      }
      g.rules.push_back({body + "-re-" + rule.name, std::move(rule.alternatives)});
    }
    for (Rule& rule : g.rules) {
      if (rule.name == body) rule.alternatives = {{Element{Element::Kind::kRule, rule_off + re.root}}};
    }
  }
  return g;
}

}  // namespace infernix::grammar
