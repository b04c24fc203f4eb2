// The filter table, and filters over strings and numbers.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

#include "chat/jinja/filters_internal.h"
#include "chat/jinja/json.h"
#include "chat/jinja/string_format.h"
#include "chat/jinja/utf8.h"

namespace infernix::jinja {

namespace {

bool Given(const Value& v) { return !v.is_undefined() && !v.is_none(); }

// transformers' tojson: json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
Value FilterToJson(Interpreter&, Value& input, CallArgs& args) {
  auto a = BindArgs("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"}, 0);
  JsonDumpOptions options;
  options.ensure_ascii = Truthy(a[0]);
  if (a[1].is_string())
    options.indent = a[1].AsString();
  else if (Given(a[1]))
    options.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(IntArg("tojson", "indent", a[1]), 0, 64)), ' ');
  if (options.indent) options.item_separator.assign(1, ',');  // json.dumps: "," when indenting
  if (Given(a[2])) {
    if (!a[2].is_list() || a[2].list().items.size() != 2)
      ThrowEval("tojson: separators must be an (item_separator, key_separator) pair");
    options.item_separator = StringArg("tojson", "separators", a[2].list().items[0]);
    options.key_separator = StringArg("tojson", "separators", a[2].list().items[1]);
  }
  options.sort_keys = Truthy(a[3]);
  return Value::String(ToJson(input, options));
}

// A filter of one string argument and no parameters: upper, lower, capitalize, ...
template <std::string (*Transform)(std::string_view)>
Value StringFilter(Interpreter&, Value& input, CallArgs& args) {
  BindArgs("string filter", args, {}, 0);
  return Value::String(Transform(ToText(input)));
}

// Jinja's title: words start after runs of whitespace, '-', '(', '{', '[' or '<'.
std::string JinjaTitle(std::string_view s) {
  std::string out;
  bool word_start = true;
  size_t length = 0;
  for (size_t pos = 0; pos < s.size(); pos += length) {
    char32_t cp = DecodeCodePoint(s, pos, &length);
    bool separator = IsPySpace(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
    char32_t mapped = separator ? cp : word_start ? ToUpperCodePoint(cp) : ToLowerCodePoint(cp);
    if (mapped == cp)
      out.append(s.substr(pos, length));
    else
      AppendCodePoint(out, mapped);
    word_start = separator;
  }
  return out;
}

std::string HtmlEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

Value FilterString(Interpreter&, Value& input, CallArgs& args) {
  BindArgs("string", args, {}, 0);
  return input.is_string() ? input : Value::String(ToText(input));
}

Value FilterTrim(Interpreter&, Value& input, CallArgs& args) {
  auto a = BindArgs("trim", args, {"chars"}, 0);
  std::string s = ToText(input);
  if (!Given(a[0])) return Value::String(std::string(PyStrip(s, nullptr, true, true)));
  std::string_view chars = StringArg("trim", "chars", a[0]);
  return Value::String(std::string(PyStrip(s, &chars, true, true)));
}

Value FilterReplace(Interpreter&, Value& input, CallArgs& args) {
  return CallMethod(Value::String(ToText(input)), "replace", args);
}

Value FilterDefault(Interpreter&, Value& input, CallArgs& args) {
  auto a = BindArgs("default", args, {"default_value", "boolean"}, 0);
  if (input.is_undefined() || (Truthy(a[1]) && !Truthy(input))) return a[0].is_undefined() ? Value::String("") : a[0];
  return input;
}

Value FilterSafe(Interpreter&, Value& input, CallArgs& args) {
  BindArgs("safe", args, {}, 0);
  return input;
}

// Python int(s, base) for a string; false if it is not an integer literal.
bool ParseInt(std::string_view s, int base, int64_t* out) {
  s = PyStrip(s, nullptr, true, true);
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s.size() > 2 && s[0] == '0' &&
      ((base == 16 && (s[1] | 32) == 'x') || (base == 8 && (s[1] | 32) == 'o') || (base == 2 && (s[1] | 32) == 'b')))
    s.remove_prefix(2);
  std::string digits;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_' && i > 0 && i + 1 < s.size() && s[i - 1] != '_') continue;  // 1_000
    digits += s[i];
  }
  if (digits.empty() || digits[0] == '+' || digits[0] == '-' || base < 2 || base > 36) return false;
  char* end = nullptr;
  errno = 0;
  long long value = std::strtoll(digits.c_str(), &end, base);
  if (errno != 0 || end != digits.c_str() + digits.size()) return false;
  *out = negative ? -value : value;
  return true;
}

// Python float(s) for a string; false if it is not a float literal.
bool ParseFloat(std::string_view s, double* out) {
  std::string text(PyStrip(s, nullptr, true, true));
  text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
  if (text.empty() || text.find_first_of("xXpP") != std::string::npos) return false;
  char* end = nullptr;
  *out = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size();
}

// Jinja's int: strings parse as int, then as float; anything that fails gives the default.
Value FilterInt(Interpreter&, Value& input, CallArgs& args) {
  auto a = BindArgs("int", args, {"default", "base"}, 0);
  Value fallback = a[0].is_undefined() ? Value::Int(0) : a[0];
  int base = a[1].is_undefined() ? 10 : static_cast<int>(IntArg("int", "base", a[1]));
  if (input.is_integral()) return Value::Int(input.AsInt());
  double d = 0;
  if (input.is_string()) {
    int64_t i = 0;
    if (ParseInt(input.AsString(), base, &i)) return Value::Int(i);
    if (!ParseFloat(input.AsString(), &d)) return fallback;
  } else if (input.is_number()) {
    d = input.AsFloat();
  } else {
    return fallback;
  }
  if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return fallback;
  return Value::Int(static_cast<int64_t>(d));
}

Value FilterFloat(Interpreter&, Value& input, CallArgs& args) {
  auto a = BindArgs("float", args, {"default"}, 0);
  double d = 0;
  if (input.is_number()) return Value::Float(input.AsFloat());
  if (input.is_string() && ParseFloat(input.AsString(), &d)) return Value::Float(d);
  return a[0].is_undefined() ? Value::Float(0.0) : a[0];
}

Value FilterAbs(Interpreter&, Value& input, CallArgs& args) {
  BindArgs("abs", args, {}, 0);
  if (input.is_integral()) {
    if (input.AsInt() == INT64_MIN) ThrowEval("integer overflow: the result does not fit in 64 bits");
    return Value::Int(std::abs(input.AsInt()));
  }
  if (input.is_number()) return Value::Float(std::fabs(input.AsFloat()));
  ThrowEval("abs: expected a number, got '{}'", TypeName(input));
}

// Python's round(x, n): the correctly rounded decimal, ties to even.
double RoundHalfEven(double x, int64_t digits) {
  if (!std::isfinite(x)) return x;
  if (digits >= 0 && digits <= 300) {
    char buffer[400];
    std::snprintf(buffer, sizeof(buffer), "%.*f", static_cast<int>(digits), x);
    return std::strtod(buffer, nullptr);
  }
  double scale = std::pow(10.0, static_cast<double>(-std::clamp<int64_t>(digits, -400, 400)));
  return std::nearbyint(x / scale) * scale;
}

Value FilterRound(Interpreter&, Value& input, CallArgs& args) {
  auto a = BindArgs("round", args, {"precision", "method"}, 0);
  int64_t precision = a[0].is_undefined() ? 0 : IntArg("round", "precision", a[0]);
  std::string method = a[1].is_undefined() ? "common" : StringArg("round", "method", a[1]);
  if (!input.is_number()) ThrowEval("round: expected a number, got '{}'", TypeName(input));
  if (method == "common") {
    if (input.is_integral() && precision >= 0) return Value::Int(input.AsInt());
    return Value::Float(RoundHalfEven(input.AsFloat(), precision));
  }
  if (method != "ceil" && method != "floor") ThrowEval("round: method must be 'common', 'ceil' or 'floor', not '{}'", method);
  double scale = std::pow(10.0, static_cast<double>(std::clamp<int64_t>(precision, -400, 400)));
  double scaled = input.AsFloat() * scale;
  return Value::Float((method == "ceil" ? std::ceil(scaled) : std::floor(scaled)) / scale);
}

// Jinja's indent: indents every line but the first (the first too when `first`); blank lines stay
// empty unless `blank`.
Value FilterIndent(Interpreter&, Value& input, CallArgs& args) {
  auto a = BindArgs("indent", args, {"width", "first", "blank"}, 0);
  std::string indent =
      a[0].is_string() ? a[0].AsString()
                       : std::string(static_cast<size_t>(std::clamp<int64_t>(
                                         a[0].is_undefined() ? 4 : IntArg("indent", "width", a[0]), 0, 1024)),
                                     ' ');
  std::vector<std::string> lines = SplitLines(ToText(input) + "\n", false);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "\n";
    if (i == 0 ? Truthy(a[1]) : Truthy(a[2]) || !lines[i].empty()) out += indent;
    out += lines[i];
  }
  return Value::String(std::move(out));
}

Value FilterWordCount(Interpreter&, Value& input, CallArgs& args) {
  BindArgs("wordcount", args, {}, 0);
  std::string s = ToText(input);
  int64_t count = 0;
  bool in_word = false;
  size_t length = 0;
  for (size_t pos = 0; pos < s.size(); pos += length) {
    bool word = IsWordCodePoint(DecodeCodePoint(s, pos, &length));
    if (word && !in_word) ++count;
    in_word = word;
  }
  return Value::Int(count);
}

Value FilterCenter(Interpreter&, Value& input, CallArgs& args) {
  auto a = BindArgs("center", args, {"width"}, 0);
  CallArgs method_args;
  method_args.positional.push_back(a[0].is_undefined() ? Value::Int(80) : a[0]);
  return CallMethod(Value::String(ToText(input)), "center", method_args);
}

// `"%s, %s" | format(a, b)`: printf-style formatting.
Value FilterFormat(Interpreter&, Value& input, CallArgs& args) {
  if (!args.positional.empty() && !args.keyword.empty())
    ThrowEval("format: give either positional or keyword arguments, not both");
  Value values = Value::Tuple(args.positional);
  if (!args.keyword.empty()) {
    values = Value::Dict();
    for (const auto& [name, value] : args.keyword) values.dict().Set(Value::String(name), value);
  }
  return Value::String(PercentFormat(ToText(input), values));
}

Value FilterAttr(Interpreter& in, Value& input, CallArgs& args) {
  auto a = BindArgs("attr", args, {"name"}, 1);
  return in.GetAttr(input, StringArg("attr", "name", a[0]));
}

Value FilterPprint(Interpreter&, Value& input, CallArgs& args) {
  BindArgs("pprint", args, {}, 0);
  return Value::String(Repr(input));
}

}  // namespace

FilterFunction FindFilter(std::string_view name) {
  static const std::unordered_map<std::string_view, FilterFunction> kFilters = {
      {"abs", FilterAbs},
      {"attr", FilterAttr},
      {"batch", FilterBatch},
      {"capitalize", StringFilter<Capitalize>},
      {"center", FilterCenter},
      {"count", FilterLength},
      {"d", FilterDefault},
      {"default", FilterDefault},
      {"dictsort", FilterDictSort},
      {"e", StringFilter<HtmlEscape>},
      {"escape", StringFilter<HtmlEscape>},
      {"first", FilterFirst},
      {"float", FilterFloat},
      {"forceescape", StringFilter<HtmlEscape>},
      {"format", FilterFormat},
      {"indent", FilterIndent},
      {"int", FilterInt},
      {"items", FilterItems},
      {"join", FilterJoin},
      {"last", FilterLast},
      {"length", FilterLength},
      {"list", FilterList},
      {"lower", StringFilter<ToLower>},
      {"map", FilterMap},
      {"max", FilterMax},
      {"min", FilterMin},
      {"pprint", FilterPprint},
      {"reject", FilterReject},
      {"rejectattr", FilterRejectAttr},
      {"replace", FilterReplace},
      {"reverse", FilterReverse},
      {"round", FilterRound},
      {"safe", FilterSafe},
      {"select", FilterSelect},
      {"selectattr", FilterSelectAttr},
      {"sort", FilterSort},
      {"string", FilterString},
      {"sum", FilterSum},
      {"title", StringFilter<JinjaTitle>},
      {"tojson", FilterToJson},
      {"trim", FilterTrim},
      {"unique", FilterUnique},
      {"upper", StringFilter<ToUpper>},
      {"wordcount", FilterWordCount},
  };
  auto it = kFilters.find(name);
  return it == kFilters.end() ? nullptr : it->second;
}

}  // namespace infernix::jinja
