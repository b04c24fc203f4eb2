// Typed, validated access to the fields of a JSON request body. Every failure is an ApiError 400
// naming the parameter path ("messages[2].content"), what was expected and what was found.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/output/tool_schema.h"  // DumpJson: compact, key order kept, bad UTF-8 replaced
#include "server/api_error.h"

namespace infernix {

using Json = nlohmann::ordered_json;

// Request bodies may nest arrays and objects this deep. Request JSON is walked recursively (the chat
// template, schemas, a Responses echo written back out), so a deeper value could overflow a worker
// thread's stack; the chat template refuses values past 256 levels itself.
inline constexpr int kMaxRequestDepth = 512;

// Parses a request body; malformed JSON is a 400 giving the byte position, nesting deeper than
// kMaxRequestDepth a 400 saying so.
Json ParseRequestBody(const std::string& body);
// JSON text as an ordered_json in time linear in its size: nlohmann's own parser checks each new member
// of an object against all the ones before it (ordered_map), so an object of 40,000 members took 1.5 s
// and a 16 MB body of them would hold a worker for half an hour. Members keep their order; a repeated
// key keeps its first position and its last value, as nlohmann's parser does. Malformed text throws
// nlohmann's parse_error (or out_of_range for a number no double holds), nesting deeper than
// kMaxRequestDepth a 400.
Json ParseOrderedJson(std::string_view text);
// obj[key] when obj is an object whose member key is a string, else "" (never throws: for matching
// a discriminator such as "type" before the member is validated).
std::string StringMember(const Json& obj, const char* key);
// "a string", "an array", ... for messages.
std::string DescribeJsonType(const Json& v);

class JsonReader {
 public:
  // `obj` must outlive the reader; `path` prefixes parameter names in errors ("" at the top).
  JsonReader(const Json& obj, std::string path);

  bool Has(const char* key) const;         // present and not null
  const Json& Get(const char* key) const;  // a null Json when absent
  std::string Param(const char* key) const;  // path + key, for messages

  std::string RequiredString(const char* key) const;
  std::optional<std::string> String(const char* key) const;
  std::optional<double> Number(const char* key, double min, double max) const;
  std::optional<int64_t> Integer(const char* key, int64_t min, int64_t max) const;
  std::optional<bool> Bool(const char* key) const;
  const Json& RequiredArray(const char* key) const;
  const Json* Array(const char* key) const;   // nullptr when absent
  const Json* Object(const char* key) const;  // nullptr when absent
  // A string or an array of strings (stop sequences), at most max_items.
  std::vector<std::string> StringOrStrings(const char* key, size_t max_items) const;

  [[noreturn]] void Fail(const char* key, const std::string& expected) const;

 private:
  const Json& obj_;
  std::string path_;
};

}  // namespace infernix
