// Python's str() and repr() of template values.
#include <charconv>
#include <cmath>

#include "chat/jinja/eval_error.h"
#include "chat/jinja/utf8.h"
#include "chat/jinja/value.h"

namespace infernix::jinja {

std::string FormatFloat(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), d, std::chars_format::scientific);
  std::string_view sci(buffer, static_cast<size_t>(result.ptr - buffer));  // "-d.ddde+XX", shortest digits
  std::string out;
  if (sci.front() == '-') {
    out += '-';
    sci.remove_prefix(1);
  }
  size_t e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e))
    if (c != '.') digits += c;
  int exponent = std::stoi(std::string(sci.substr(e + 1)));
  int point = exponent + 1;  // digits before the decimal point
  int n = static_cast<int>(digits.size());
  if (point <= -4 || point > 16) {
    out += digits[0];
    if (n > 1) out += "." + digits.substr(1);
    out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
  } else if (point <= 0) {
    out += "0." + std::string(static_cast<size_t>(-point), '0') + digits;
  } else if (point >= n) {
    out += digits + std::string(static_cast<size_t>(point - n), '0') + ".0";
  } else {
    out += digits.substr(0, static_cast<size_t>(point)) + "." + digits.substr(static_cast<size_t>(point));
  }
  return out;
}

namespace {

// Code points Python's str.isprintable() rejects (an approximation of the Unicode categories Cc,
// Cf, Zl, Zp, Zs other than space, Co and surrogates).
bool IsNonPrintable(char32_t cp) {
  return cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD || (cp >= 0x600 && cp <= 0x605) || cp == 0x61C ||
         cp == 0x6DD || cp == 0x70F || cp == 0x180E || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200F) ||
         (cp >= 0x2028 && cp <= 0x202F) || (cp >= 0x205F && cp <= 0x206F) || cp == 0x3000 ||
         (cp >= 0xD800 && cp <= 0xF8FF) || cp == 0xFEFF || (cp >= 0xFFF9 && cp <= 0xFFFB);
}

void AppendStringRepr(std::string& out, std::string_view s) {
  char quote = s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos ? '"' : '\'';
  out += quote;
  size_t length = 0;
  for (size_t pos = 0; pos < s.size(); pos += length) {
    char32_t cp = DecodeCodePoint(s, pos, &length);
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == 0xFFFD && length == 1) {
      out += s[pos];  // an invalid byte: copied through
    } else if (IsNonPrintable(cp)) {
      out += cp < 0x100 ? fmt::format("\\x{:02x}", static_cast<uint32_t>(cp))
                        : fmt::format("\\u{:04x}", static_cast<uint32_t>(cp));
    } else {
      out.append(s.substr(pos, length));
    }
  }
  out += quote;
}

void AppendRepr(std::string& out, const Value& v, int depth);

void AppendEntries(std::string& out, const DictObj& dict, int depth) {
  out += '{';
  for (size_t i = 0; i < dict.entries.size(); ++i) {
    if (i > 0) out += ", ";
    AppendRepr(out, dict.entries[i].first, depth + 1);
    out += ": ";
    AppendRepr(out, dict.entries[i].second, depth + 1);
  }
  out += '}';
}

void AppendRepr(std::string& out, const Value& v, int depth) {
  if (depth > kMaxValueDepth) ThrowEval("cannot print values nested deeper than {} levels", kMaxValueDepth);
  switch (v.kind()) {
    case Value::Kind::kUndefined: out += "Undefined"; return;
    case Value::Kind::kString: AppendStringRepr(out, v.AsString()); return;
    case Value::Kind::kList: {
      const ListObj& list = v.list();
      out += list.is_tuple ? '(' : '[';
      for (size_t i = 0; i < list.items.size(); ++i) {
        if (i > 0) out += ", ";
        AppendRepr(out, list.items[i], depth + 1);
      }
      if (list.is_tuple && list.items.size() == 1) out += ',';
      out += list.is_tuple ? ')' : ']';
      return;
    }
    case Value::Kind::kDict: AppendEntries(out, v.dict(), depth); return;
    case Value::Kind::kNamespace:
      out += "<Namespace ";
      AppendEntries(out, v.ns().attrs, depth);
      out += '>';
      return;
    case Value::Kind::kLoop:
      out += fmt::format("<LoopContext {}/{}>", v.loop().index + 1, v.loop().items->size());
      return;
    case Value::Kind::kCallable: out += fmt::format("<function {}>", v.callable().name); return;
    default: out += Str(v); return;
  }
}

}  // namespace

std::string Str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "";
    case Value::Kind::kNone: return "None";
    case Value::Kind::kBool: return v.AsBool() ? "True" : "False";
    case Value::Kind::kInt: return std::to_string(v.AsInt());
    case Value::Kind::kFloat: return FormatFloat(v.AsFloat());
    case Value::Kind::kString: return v.AsString();
    default: return Repr(v);
  }
}

std::string Repr(const Value& v) {
  std::string out;
  AppendRepr(out, v, 0);
  return out;
}

}  // namespace infernix::jinja
