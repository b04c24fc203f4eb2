#include "chat/jinja/string_format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "chat/jinja/eval_error.h"
#include "chat/jinja/interpreter.h"
#include "chat/jinja/utf8.h"

namespace infernix::jinja {

namespace {

// A number or string laid out in a field: [sign][prefix][body], padded to `width` code points.
struct Field {
  std::string sign, prefix, body;
  char32_t fill = ' ';
  char align = '>';  // '<', '>', '^', or '=' (padding between the sign / prefix and the body)
  int64_t width = -1;
};

std::string Layout(const Field& f) {
  std::string fill;
  AppendCodePoint(fill, f.fill);
  int64_t length = static_cast<int64_t>(CountCodePoints(f.sign) + CountCodePoints(f.prefix) + CountCodePoints(f.body));
  int64_t pad = std::max<int64_t>(0, f.width - length);
  auto repeat = [&](int64_t n) {
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += fill;
    return out;
  };
  switch (f.align) {
    case '<': return f.sign + f.prefix + f.body + repeat(pad);
    case '^': return repeat(pad / 2) + f.sign + f.prefix + f.body + repeat(pad - pad / 2);
    case '=': return f.sign + f.prefix + repeat(pad) + f.body;
    default: return repeat(pad) + f.sign + f.prefix + f.body;
  }
}

std::string Digits(uint64_t value, int base, bool upper) {
  if (value == 0) return "0";
  std::string out;
  const char* alphabet = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  for (; value > 0; value /= static_cast<uint64_t>(base)) out.insert(out.begin(), alphabet[value % static_cast<uint64_t>(base)]);
  return out;
}

// Inserts `separator` every `group` digits from the right of the integer part of `number` (all of it
// when `integer`; else up to a fraction, exponent or '%').
std::string Group(const std::string& number, char separator, size_t group, bool integer) {
  size_t end = integer ? number.size() : std::min(number.size(), number.find_first_of(".eE%"));
  std::string out;
  for (size_t i = 0; i < end; ++i) {
    if (i > 0 && (end - i) % group == 0) out += separator;
    out += number[i];
  }
  return out + number.substr(end);
}

std::string FormatFloatC(double value, char type, int64_t precision, bool alternate) {
  char format[16];
  std::snprintf(format, sizeof(format), "%%%s.%d%c", alternate ? "#" : "", static_cast<int>(std::min<int64_t>(precision, 300)),
                type);
  char buffer[700];
  std::snprintf(buffer, sizeof(buffer), format, value);
  return buffer;
}

// Sets the body from a formatted number, and the sign: '-', or '+' / ' ' when asked for.
void SetSign(Field& f, std::string text, bool negative, char sign_flag) {
  if (!text.empty() && text[0] == '-') text.erase(0, 1);
  f.sign = negative ? "-" : sign_flag == '+' ? "+" : sign_flag == ' ' ? " " : "";
  f.body = std::move(text);
}

std::string TruncateCodePoints(std::string text, int64_t limit) {
  if (limit < 0) return text;
  std::vector<size_t> offsets = CodePointOffsets(text);
  if (limit < static_cast<int64_t>(offsets.size()) - 1) text.resize(offsets[static_cast<size_t>(limit)]);
  return text;
}

// An integer in `base` with its sign; the body is zero-extended to `min_digits`.
void SetInteger(Field& f, int64_t i, int base, bool upper, char sign_flag, int64_t min_digits) {
  uint64_t magnitude = i < 0 ? 0 - static_cast<uint64_t>(i) : static_cast<uint64_t>(i);
  std::string digits = Digits(magnitude, base, upper);
  if (min_digits > static_cast<int64_t>(digits.size())) digits.insert(0, static_cast<size_t>(min_digits) - digits.size(), '0');
  SetSign(f, std::move(digits), i < 0, sign_flag);
}

// --- printf-style (%) formatting

std::string PercentOne(char conversion, const std::string& flags, int64_t width, int64_t precision, const Value& v) {
  Field f;
  f.width = width;
  bool left = flags.find('-') != std::string::npos, zero = flags.find('0') != std::string::npos && !left;
  bool alternate = flags.find('#') != std::string::npos;
  char sign_flag = flags.find('+') != std::string::npos ? '+' : flags.find(' ') != std::string::npos ? ' ' : 0;
  f.align = left ? '<' : zero ? '=' : '>';
  f.fill = zero ? '0' : ' ';
  if (conversion == 's' || conversion == 'r' || conversion == 'a' || conversion == 'c') {
    f.fill = ' ';
    f.align = left ? '<' : '>';
    if (conversion != 'c') {
      f.body = TruncateCodePoints(conversion == 's' ? ToText(v) : Repr(v), precision);
    } else if (v.is_string() && CountCodePoints(v.AsString()) == 1) {
      f.body = v.AsString();
    } else if (v.is_integral() && v.AsInt() >= 0 && v.AsInt() <= 0x10FFFF) {
      AppendCodePoint(f.body, static_cast<char32_t>(v.AsInt()));
    } else {
      ThrowEval("%c requires an integer code point or a single character, not '{}'", TypeName(v));
    }
    return Layout(f);
  }
  if (std::strchr("diuxXo", conversion) != nullptr) {
    bool decimal = std::strchr("diu", conversion) != nullptr;
    if (!v.is_number() || (!decimal && !v.is_integral()))
      ThrowEval("%{} format: {} is required, not '{}'", conversion, decimal ? "a number" : "an integer", TypeName(v));
    double d = v.AsFloat();
    if (!v.is_integral() && (!std::isfinite(d) || std::fabs(d) >= 9.2e18))
      ThrowEval("%{}: cannot convert {} to an integer", conversion, FormatFloat(d));
    int64_t i = v.is_integral() ? v.AsInt() : static_cast<int64_t>(d);
    SetInteger(f, i, decimal ? 10 : conversion == 'o' ? 8 : 16, conversion == 'X', sign_flag, precision);
    if (alternate && !decimal) f.prefix = conversion == 'o' ? "0o" : conversion == 'x' ? "0x" : "0X";
    return Layout(f);
  }
  if (std::strchr("fFeEgG", conversion) != nullptr) {
    if (!v.is_number()) ThrowEval("%{} format: a number is required, not '{}'", conversion, TypeName(v));
    double d = v.AsFloat();
    if (!std::isfinite(d)) f.fill = ' ';
    SetSign(f, FormatFloatC(d, conversion, precision < 0 ? 6 : precision, alternate), std::signbit(d) && !std::isnan(d),
            sign_flag);
    return Layout(f);
  }
  ThrowEval("unsupported format character '{}' in a '%' format", conversion);
}

// --- str.format

struct Spec {
  char32_t fill = ' ';
  char align = 0;
  char sign = '-';
  bool alternate = false;
  int64_t width = -1;
  char grouping = 0;
  int64_t precision = -1;
  char type = 0;
};

Spec ParseSpec(const std::string& text) {
  Spec spec;
  size_t i = 0, length = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  char32_t first = text.empty() ? 0 : DecodeCodePoint(text, 0, &length);
  if (!text.empty() && length < text.size() && is_align(text[length])) {
    spec.fill = first;
    spec.align = text[length];
    i = length + 1;
  } else if (!text.empty() && is_align(text[0])) {
    spec.align = text[0];
    i = 1;
  }
  if (i < text.size() && (text[i] == '+' || text[i] == '-' || text[i] == ' ')) spec.sign = text[i++];
  if (i < text.size() && text[i] == '#') {
    spec.alternate = true;
    ++i;
  }
  if (i < text.size() && text[i] == '0') {
    if (spec.align == 0) {
      spec.fill = '0';
      spec.align = '=';
    }
    ++i;
  }
  auto number = [&]() {
    int64_t n = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9' && n < 100000) n = n * 10 + (text[i++] - '0');
    return n;
  };
  if (i < text.size() && text[i] >= '0' && text[i] <= '9') spec.width = number();
  if (i < text.size() && (text[i] == ',' || text[i] == '_')) spec.grouping = text[i++];
  if (i < text.size() && text[i] == '.') {
    ++i;
    if (i >= text.size() || text[i] < '0' || text[i] > '9') ThrowEval("format spec '{}': missing precision", text);
    spec.precision = number();
  }
  if (i < text.size()) spec.type = text[i++];
  if (i != text.size()) ThrowEval("invalid format spec '{}'", text);
  return spec;
}

std::string FormatWithSpec(const Value& v, const std::string& spec_text) {
  if (spec_text.empty()) return ToText(v);
  Spec spec = ParseSpec(spec_text);
  Field f;
  f.fill = spec.fill;
  f.width = spec.width;
  if (v.is_string()) {
    if (spec.type != 0 && spec.type != 's') ThrowEval("unknown format code '{}' for a string", spec.type);
    f.body = TruncateCodePoints(v.AsString(), spec.precision);
    f.align = spec.align == 0 ? '<' : spec.align;
    return Layout(f);
  }
  if (!v.is_number()) ThrowEval("a format spec ('{}') cannot be applied to a '{}'", spec_text, TypeName(v));
  f.align = spec.align == 0 ? '>' : spec.align;
  char type = spec.type;
  if (v.is_integral() && (type == 0 || std::strchr("dnboxXc", type) != nullptr)) {
    if (type == 'c') {
      AppendCodePoint(f.body, static_cast<char32_t>(std::clamp<int64_t>(v.AsInt(), 0, 0x10FFFF)));
      return Layout(f);
    }
    int base = type == 'b' ? 2 : type == 'o' ? 8 : (type == 'x' || type == 'X') ? 16 : 10;
    SetInteger(f, v.AsInt(), base, type == 'X', spec.sign, 0);
    if (spec.grouping) f.body = Group(f.body, spec.grouping, base == 10 ? 3 : 4, true);
    if (spec.alternate && base != 10) f.prefix = base == 2 ? "0b" : base == 8 ? "0o" : type == 'X' ? "0X" : "0x";
    return Layout(f);
  }
  double d = v.AsFloat();
  std::string text;
  if (type == 0 && spec.precision < 0) {
    text = v.is_integral() ? std::to_string(v.AsInt()) : FormatFloat(d);
  } else if (type == 0 || type == 'g' || type == 'G' || type == 'n') {
    int64_t precision = spec.precision < 0 ? 6 : std::max<int64_t>(spec.precision, 1);
    text = FormatFloatC(d, type == 'G' ? 'G' : 'g', precision, spec.alternate);
    if (type == 0 && std::isfinite(d) && text.find_first_of(".e") == std::string::npos) text += ".0";
  } else if (std::strchr("fFeE", type) != nullptr) {
    text = FormatFloatC(d, type, spec.precision < 0 ? 6 : spec.precision, spec.alternate);
  } else if (type == '%') {
    text = FormatFloatC(d * 100, 'f', spec.precision < 0 ? 6 : spec.precision, spec.alternate) + "%";
  } else {
    ThrowEval("unknown format code '{}' for a number", type);
  }
  SetSign(f, text, std::signbit(d) && !std::isnan(d), spec.sign);
  if (spec.grouping && std::isfinite(d)) f.body = Group(f.body, spec.grouping, 3, false);
  return Layout(f);
}

bool AllDigits(const std::string& s) {
  return !s.empty() && s.size() < 10 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Resolves a replacement field name: "", "0", "name", then ".attr" and "[key]" accessors.
Value ResolveField(const std::string& name, const CallArgs& args, size_t* auto_index, int* numbering) {
  size_t end = name.find_first_of(".[");
  std::string head = name.substr(0, end);
  Value value;
  if (head.empty() || AllDigits(head)) {
    int mode = head.empty() ? 1 : 2;
    if (*numbering != 0 && *numbering != mode)
      ThrowEval("str.format: cannot switch between automatic and manual field numbering");
    *numbering = mode;
    size_t index = head.empty() ? (*auto_index)++ : std::stoul(head);
    if (index >= args.positional.size()) ThrowEval("str.format: replacement index {} out of range", index);
    value = args.positional[index];
  } else {
    auto it = std::find_if(args.keyword.begin(), args.keyword.end(), [&](const auto& kv) { return kv.first == head; });
    if (it == args.keyword.end()) ThrowEval("str.format: no argument named '{}'", head);
    value = it->second;
  }
  while (end != std::string::npos) {
    bool item = name[end] == '[';
    size_t stop = item ? name.find(']', end) : name.find_first_of(".[", end + 1);
    if (item && stop == std::string::npos) ThrowEval("str.format: missing ']' in field '{}'", name);
    std::string key = name.substr(end + 1, (stop == std::string::npos ? name.size() : stop) - end - 1);
    const Value* found = nullptr;
    if (item && value.is_dict()) found = value.dict().Find(AllDigits(key) ? Value::Int(std::stoll(key)) : Value::String(key));
    if (item && value.is_list() && AllDigits(key) && std::stoul(key) < value.list().items.size())
      found = &value.list().items[std::stoul(key)];
    if (!item && value.kind() == Value::Kind::kNamespace) found = value.ns().attrs.Find(key);
    if (found == nullptr) ThrowEval("str.format: cannot resolve '{}' in field '{}'", key, name);
    value = *found;
    end = item ? (stop + 1 < name.size() ? stop + 1 : std::string::npos) : stop;
  }
  return value;
}

}  // namespace

std::string PercentFormat(const std::string& format, const Value& args) {
  const DictObj* mapping = args.is_dict() ? &args.dict() : nullptr;
  std::vector<Value> values = args.is_list() && args.list().is_tuple ? args.list().items : std::vector<Value>{args};
  size_t next = 0, i = 0, n = format.size();
  std::string out;
  auto next_value = [&]() -> const Value& {
    if (next >= values.size()) ThrowEval("not enough arguments for the '%' format string");
    return values[next++];
  };
  auto number = [&]() -> int64_t {  // a width or precision: digits, or '*' for the next argument
    if (i < n && format[i] == '*') {
      ++i;
      const Value& v = next_value();
      if (!v.is_integral()) ThrowEval("'*' in a '%' format needs an integer argument");
      return v.AsInt();
    }
    int64_t value = 0;
    while (i < n && format[i] >= '0' && format[i] <= '9' && value < 100000) value = value * 10 + (format[i++] - '0');
    return value;
  };
  while (i < n) {
    if (format[i] != '%') {
      out += format[i++];
      continue;
    }
    if (++i >= n) ThrowEval("incomplete '%' format at the end of the string");
    const Value* keyed = nullptr;
    if (format[i] == '(') {
      size_t close = format.find(')', i);
      if (close == std::string::npos) ThrowEval("incomplete '%(name)' key in a '%' format");
      if (mapping == nullptr) ThrowEval("a '%(name)' format requires a dict argument");
      std::string key = format.substr(i + 1, close - i - 1);
      keyed = mapping->Find(std::string_view(key));
      if (keyed == nullptr) ThrowEval("key '{}' not found for a '%' format", key);
      i = close + 1;
    }
    std::string flags;
    while (i < n && std::strchr("-+ #0", format[i]) != nullptr) flags += format[i++];
    int64_t width = i < n && (format[i] == '*' || (format[i] >= '0' && format[i] <= '9')) ? number() : -1;
    int64_t precision = -1;
    if (i < n && format[i] == '.') {
      ++i;
      precision = number();
    }
    while (i < n && std::strchr("hlL", format[i]) != nullptr) ++i;
    if (i >= n) ThrowEval("incomplete '%' format at the end of the string");
    char conversion = format[i++];
    if (conversion == '%') {
      out += '%';
      continue;
    }
    const Value& value = keyed != nullptr ? *keyed : mapping != nullptr ? args : next_value();
    out += PercentOne(conversion, flags, width, precision, value);
  }
  if (mapping == nullptr && next < values.size()) ThrowEval("not all arguments converted by the '%' format string");
  return out;
}

std::string BraceFormat(const std::string& format, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  int numbering = 0;  // 1: automatic ({}), 2: manual ({0})
  for (size_t i = 0; i < format.size();) {
    char c = format[i];
    bool doubled = i + 1 < format.size() && format[i + 1] == c;
    if ((c == '{' || c == '}') && doubled) {
      out += c;
      i += 2;
      continue;
    }
    if (c == '}') ThrowEval("str.format: single '}}' in the format string");
    if (c != '{') {
      out += c;
      ++i;
      continue;
    }
    size_t close = format.find('}', i);
    if (close == std::string::npos) ThrowEval("str.format: unmatched '{{' in the format string");
    std::string field = format.substr(i + 1, close - i - 1);
    if (field.find('{') != std::string::npos) ThrowEval("str.format: nested replacement fields are not supported");
    size_t colon = field.find(':');
    std::string spec = colon == std::string::npos ? "" : field.substr(colon + 1);
    field = field.substr(0, colon);
    char conversion = 0;
    if (size_t bang = field.find('!'); bang != std::string::npos) {
      if (bang + 2 != field.size()) ThrowEval("str.format: bad conversion in field '{}'", field);
      conversion = field[bang + 1];
      field.resize(bang);
    }
    Value value = ResolveField(field, args, &auto_index, &numbering);
    if (conversion == 'r' || conversion == 'a')
      value = Value::String(Repr(value));
    else if (conversion == 's')
      value = Value::String(ToText(value));
    else if (conversion != 0)
      ThrowEval("str.format: unknown conversion '!{}'", conversion);
    out += FormatWithSpec(value, spec);
    i = close + 1;
  }
  return out;
}

}  // namespace infernix::jinja
