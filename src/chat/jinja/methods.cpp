// Python methods of str, list and dict that templates call: `s.split(',')`, `d.items()`, ...
// String positions are code point indexes, as in Python.
#include <algorithm>
#include <unordered_map>

#include "chat/jinja/builtins.h"
#include "chat/jinja/operators.h"
#include "chat/jinja/string_format.h"
#include "chat/jinja/utf8.h"

namespace infernix::jinja {

namespace {

using Method = Value (*)(const Value& self, CallArgs& args);

bool Given(const Value& v) { return !v.is_undefined() && !v.is_none(); }

Value StringList(std::vector<std::string> parts) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (auto& part : parts) items.push_back(Value::String(std::move(part)));
  return Value::List(std::move(items));
}

// s[start:end] for the optional start / end arguments of find, count, startswith, ...; *base is the
// code point index the window starts at.
std::string Window(const std::string& s, const Value& start, const Value& end, int64_t* base) {
  *base = 0;
  if (!Given(start) && !Given(end)) return s;
  std::vector<size_t> offsets = CodePointOffsets(s);
  int64_t n = static_cast<int64_t>(offsets.size()) - 1;
  auto clamp = [&](const Value& v, int64_t fallback) {
    if (!Given(v)) return fallback;
    int64_t i = IntArg("str method", "start/end", v);
    if (i < 0) i = std::max<int64_t>(0, i + n);
    return std::min(i, n);
  };
  int64_t b = clamp(start, 0), e = std::max(clamp(end, n), b);
  *base = b;
  return s.substr(offsets[static_cast<size_t>(b)], offsets[static_cast<size_t>(e)] - offsets[static_cast<size_t>(b)]);
}

Value AffixTest(const Value& self, CallArgs& args, bool prefix) {
  std::string_view name = prefix ? "str.startswith" : "str.endswith";
  auto a = BindArgs(name, args, {"affix", "start", "end"}, 1);
  int64_t base = 0;
  std::string window = Window(self.AsString(), a[1], a[2], &base);
  std::vector<Value> affixes = a[0].is_list() ? a[0].list().items : std::vector<Value>{a[0]};
  for (const Value& affix : affixes) {
    const std::string& s = StringArg(name, "affix", affix);
    if (prefix ? window.starts_with(s) : window.ends_with(s)) return Value::Bool(true);
  }
  return Value::Bool(false);
}

Value StartsWith(const Value& self, CallArgs& args) { return AffixTest(self, args, true); }
Value EndsWith(const Value& self, CallArgs& args) { return AffixTest(self, args, false); }

// Python's str.split / str.rsplit with a separator.
std::vector<std::string> SplitOn(const std::string& s, const std::string& sep, int64_t maxsplit, bool from_right) {
  std::vector<std::string> parts;
  size_t begin = 0, end = s.size();
  for (int64_t splits = 0; maxsplit < 0 || splits < maxsplit; ++splits) {
    size_t i = from_right ? (end >= sep.size() ? s.rfind(sep, end - sep.size()) : std::string::npos) : s.find(sep, begin);
    if (i == std::string::npos) break;
    if (from_right) {
      parts.push_back(s.substr(i + sep.size(), end - i - sep.size()));
      end = i;
    } else {
      parts.push_back(s.substr(begin, i - begin));
      begin = i + sep.size();
    }
  }
  parts.push_back(s.substr(begin, end - begin));
  if (from_right) std::reverse(parts.begin(), parts.end());
  return parts;
}

// Python's str.split() / rsplit() without a separator: runs of whitespace separate words, and
// leading and trailing whitespace is ignored (except in the unsplit remainder).
std::vector<std::string> SplitWhitespace(const std::string& s, int64_t maxsplit, bool from_right) {
  std::vector<std::string> chars = SplitCodePoints(s);
  if (from_right) std::reverse(chars.begin(), chars.end());
  auto space = [&](size_t i) {
    size_t length = 0;
    return IsPySpace(DecodeCodePoint(chars[i], 0, &length));
  };
  auto join = [&](size_t from, size_t to) {
    std::string out;
    if (from_right)
      for (size_t i = to; i > from; --i) out += chars[i - 1];
    else
      for (size_t i = from; i < to; ++i) out += chars[i];
    return out;
  };
  std::vector<std::string> parts;
  size_t n = chars.size();
  for (size_t i = 0; i < n;) {
    while (i < n && space(i)) ++i;
    if (i == n) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      parts.push_back(join(i, n));
      break;
    }
    size_t start = i;
    while (i < n && !space(i)) ++i;
    parts.push_back(join(start, i));
  }
  if (from_right) std::reverse(parts.begin(), parts.end());
  return parts;
}

Value Split(const Value& self, CallArgs& args, bool from_right) {
  std::string_view name = from_right ? "str.rsplit" : "str.split";
  auto a = BindArgs(name, args, {"sep", "maxsplit"}, 0);
  int64_t maxsplit = Given(a[1]) ? IntArg(name, "maxsplit", a[1]) : -1;
  if (!Given(a[0])) return StringList(SplitWhitespace(self.AsString(), maxsplit, from_right));
  const std::string& sep = StringArg(name, "sep", a[0]);
  if (sep.empty()) ThrowEval("{}: empty separator", name);
  return StringList(SplitOn(self.AsString(), sep, maxsplit, from_right));
}

Value SplitLeft(const Value& self, CallArgs& args) { return Split(self, args, false); }
Value SplitRight(const Value& self, CallArgs& args) { return Split(self, args, true); }

Value SplitLinesMethod(const Value& self, CallArgs& args) {
  auto a = BindArgs("str.splitlines", args, {"keepends"}, 0);
  return StringList(SplitLines(self.AsString(), Truthy(a[0])));
}

Value Strip(const Value& self, CallArgs& args, bool left, bool right) {
  auto a = BindArgs("str.strip", args, {"chars"}, 0);
  if (!Given(a[0])) return Value::String(std::string(PyStrip(self.AsString(), nullptr, left, right)));
  std::string_view chars = StringArg("str.strip", "chars", a[0]);
  return Value::String(std::string(PyStrip(self.AsString(), &chars, left, right)));
}

Value StripBoth(const Value& self, CallArgs& args) { return Strip(self, args, true, true); }
Value StripLeft(const Value& self, CallArgs& args) { return Strip(self, args, true, false); }
Value StripRight(const Value& self, CallArgs& args) { return Strip(self, args, false, true); }

// str.replace(old, new, count=-1), also the `replace` filter (which converts its arguments to str).
Value Replace(const Value& self, CallArgs& args) {
  auto a = BindArgs("replace", args, {"old", "new", "count"}, 2);
  const std::string& s = self.AsString();
  std::string old = ToText(a[0]), replacement = ToText(a[1]);
  int64_t count = Given(a[2]) ? IntArg("replace", "count", a[2]) : -1;
  std::string out;
  if (old.empty()) {  // Python inserts `replacement` around every code point
    std::vector<std::string> chars = SplitCodePoints(s);
    for (size_t i = 0; i <= chars.size(); ++i) {
      if (count < 0 || static_cast<int64_t>(i) < count) out += replacement;
      if (i < chars.size()) out += chars[i];
      CheckTextSize(out.size());
    }
    return Value::String(std::move(out));
  }
  size_t pos = 0;
  for (int64_t done = 0; count < 0 || done < count; ++done) {
    size_t i = s.find(old, pos);
    if (i == std::string::npos) break;
    out.append(s, pos, i - pos);
    out += replacement;
    CheckTextSize(out.size());
    pos = i + old.size();
  }
  out.append(s, pos);
  return Value::String(std::move(out));
}

template <std::string (*Transform)(std::string_view)>
Value Transformed(const Value& self, CallArgs& args) {
  BindArgs("str method", args, {}, 0);
  return Value::String(Transform(self.AsString()));
}

Value Format(const Value& self, CallArgs& args) { return Value::String(BraceFormat(self.AsString(), args)); }

// find / rfind / index / rindex: the code point index of `sub`, or -1 (an error for index).
Value Find(const Value& self, CallArgs& args, bool from_right, bool must_exist) {
  auto a = BindArgs("str.find", args, {"sub", "start", "end"}, 1);
  const std::string& sub = StringArg("str.find", "sub", a[0]);
  int64_t base = 0;
  std::string window = Window(self.AsString(), a[1], a[2], &base);
  size_t i = from_right ? window.rfind(sub) : window.find(sub);
  if (i == std::string::npos) {
    if (must_exist) ThrowEval("str.index: substring not found");
    return Value::Int(-1);
  }
  return Value::Int(base + static_cast<int64_t>(CountCodePoints(std::string_view(window).substr(0, i))));
}

Value FindLeft(const Value& self, CallArgs& args) { return Find(self, args, false, false); }
Value FindRight(const Value& self, CallArgs& args) { return Find(self, args, true, false); }
Value IndexLeft(const Value& self, CallArgs& args) { return Find(self, args, false, true); }
Value IndexRight(const Value& self, CallArgs& args) { return Find(self, args, true, true); }

Value CountMethod(const Value& self, CallArgs& args) {
  auto a = BindArgs("str.count", args, {"sub", "start", "end"}, 1);
  const std::string& sub = StringArg("str.count", "sub", a[0]);
  int64_t base = 0;
  std::string window = Window(self.AsString(), a[1], a[2], &base);
  if (sub.empty()) return Value::Int(static_cast<int64_t>(CountCodePoints(window)) + 1);
  int64_t count = 0;
  for (size_t i = window.find(sub); i != std::string::npos; i = window.find(sub, i + sub.size())) ++count;
  return Value::Int(count);
}

Value Join(const Value& self, CallArgs& args) {
  auto a = BindArgs("str.join", args, {"iterable"}, 1);
  std::string out;
  size_t index = 0;
  for (const Value& item : Iterate(a[0])) {
    if (!item.is_string()) ThrowEval("str.join: item {} is a '{}', expected a string", index, TypeName(item));
    if (index++ > 0) out += self.AsString();
    out += item.AsString();
    CheckTextSize(out.size());
  }
  return Value::String(std::move(out));
}

template <bool (*Predicate)(char32_t)>
Value CharClass(const Value& self, CallArgs& args) {
  BindArgs("str.is*", args, {}, 0);
  const std::string& s = self.AsString();
  if (s.empty()) return Value::Bool(false);
  size_t length = 0;
  for (size_t pos = 0; pos < s.size(); pos += length)
    if (!Predicate(DecodeCodePoint(s, pos, &length))) return Value::Bool(false);
  return Value::Bool(true);
}

bool IsDigitCp(char32_t cp) { return cp >= '0' && cp <= '9'; }
bool IsAlphaCp(char32_t cp) { return IsWordCodePoint(cp) && !IsDigitCp(cp) && cp != '_'; }
bool IsAlnumCp(char32_t cp) { return IsWordCodePoint(cp) && cp != '_'; }

template <bool upper>
Value CaseTest(const Value& self, CallArgs& args) {
  BindArgs("str.islower", args, {}, 0);
  const std::string& s = self.AsString();
  std::string same = upper ? ToUpper(s) : ToLower(s), other = upper ? ToLower(s) : ToUpper(s);
  return Value::Bool(same == s && other != s);
}

// center / ljust / rjust / zfill ('0').
template <char align>
Value Pad(const Value& self, CallArgs& args) {
  auto a = align == '0' ? BindArgs("str.zfill", args, {"width"}, 1) : BindArgs("str padding", args, {"width", "fillchar"}, 1);
  int64_t width = IntArg("str padding", "width", a[0]);
  std::string fill = align == '0' ? "0" : Given(a[1]) ? StringArg("str padding", "fillchar", a[1]) : " ";
  if (CountCodePoints(fill) != 1) ThrowEval("str padding: the fill character must be exactly one character");
  const std::string& s = self.AsString();
  int64_t margin = width - static_cast<int64_t>(CountCodePoints(s));
  if (margin <= 0) return self;
  CheckTextSize(static_cast<size_t>(std::min<int64_t>(margin, int64_t{1} << 40)) * fill.size() + s.size());
  int64_t left = align == '>' || align == '0' ? margin : align == '<' ? 0 : margin / 2 + (margin & width & 1);
  auto repeat = [&](int64_t n) {
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += fill;
    return out;
  };
  if (align == '0' && !s.empty() && (s[0] == '+' || s[0] == '-'))
    return Value::String(s.substr(0, 1) + repeat(left) + s.substr(1));
  return Value::String(repeat(left) + s + repeat(margin - left));
}

template <bool prefix>
Value RemoveAffix(const Value& self, CallArgs& args) {
  auto a = BindArgs(prefix ? "str.removeprefix" : "str.removesuffix", args, {"affix"}, 1);
  const std::string& s = self.AsString();
  const std::string& affix = StringArg("str.removeprefix", "affix", a[0]);
  if (prefix && s.starts_with(affix)) return Value::String(s.substr(affix.size()));
  if (!prefix && s.ends_with(affix)) return Value::String(s.substr(0, s.size() - affix.size()));
  return self;
}

// list.append: Jinja's sandbox forbids it, but templates in the wild use `{% set _ = l.append(x) %}`.
Value Append(const Value& self, CallArgs& args) {
  auto a = BindArgs("list.append", args, {"item"}, 1);
  if (ContainsContainer(a[0], self.container())) ThrowEval("list.append: cannot append a list to itself");
  CheckListSize(self.list().items.size() + 1);
  self.list().items.push_back(a[0]);
  return Value::None();
}

Value Extend(const Value& self, CallArgs& args) {
  auto a = BindArgs("list.extend", args, {"iterable"}, 1);
  std::vector<Value> items = Iterate(a[0]);
  for (const Value& item : items)
    if (ContainsContainer(item, self.container())) ThrowEval("list.extend: cannot add a list to itself");
  CheckListSize(self.list().items.size() + items.size());
  self.list().items.insert(self.list().items.end(), items.begin(), items.end());
  return Value::None();
}

Value ListIndex(const Value& self, CallArgs& args) {
  auto a = BindArgs("list.index", args, {"value"}, 1);
  const auto& items = self.list().items;
  for (size_t i = 0; i < items.size(); ++i)
    if (Equals(items[i], a[0])) return Value::Int(static_cast<int64_t>(i));
  ThrowEval("list.index: {} is not in the list", Repr(a[0]));
}

Value ListCount(const Value& self, CallArgs& args) {
  auto a = BindArgs("list.count", args, {"value"}, 1);
  int64_t n = 0;
  for (const Value& item : self.list().items) n += Equals(item, a[0]) ? 1 : 0;
  return Value::Int(n);
}

Value DictItems(const Value& self, CallArgs& args) {
  BindArgs("dict.items", args, {}, 0);
  std::vector<Value> pairs;
  pairs.reserve(self.dict().entries.size());
  for (const auto& [key, value] : self.dict().entries) pairs.push_back(Value::Tuple({key, value}));
  return Value::List(std::move(pairs));
}

Value DictKeys(const Value& self, CallArgs& args) {
  BindArgs("dict.keys", args, {}, 0);
  return Value::List(Iterate(self));
}

Value DictValues(const Value& self, CallArgs& args) {
  BindArgs("dict.values", args, {}, 0);
  std::vector<Value> values;
  for (const auto& entry : self.dict().entries) values.push_back(entry.second);
  return Value::List(std::move(values));
}

Value DictGet(const Value& self, CallArgs& args) {
  auto a = BindArgs("dict.get", args, {"key", "default"}, 1);
  if (const Value* v = self.dict().Find(a[0])) return *v;
  return a[1].is_undefined() ? Value::None() : a[1];
}

const std::unordered_map<std::string_view, Method>* MethodTable(const Value& self) {
  static const std::unordered_map<std::string_view, Method> kString = {
      {"startswith", StartsWith},
      {"endswith", EndsWith},
      {"split", SplitLeft},
      {"rsplit", SplitRight},
      {"splitlines", SplitLinesMethod},
      {"strip", StripBoth},
      {"lstrip", StripLeft},
      {"rstrip", StripRight},
      {"replace", Replace},
      {"upper", Transformed<ToUpper>},
      {"lower", Transformed<ToLower>},
      {"title", Transformed<PyTitle>},
      {"capitalize", Transformed<Capitalize>},
      {"format", Format},
      {"find", FindLeft},
      {"rfind", FindRight},
      {"index", IndexLeft},
      {"rindex", IndexRight},
      {"count", CountMethod},
      {"join", Join},
      {"isdigit", CharClass<IsDigitCp>},
      {"isdecimal", CharClass<IsDigitCp>},
      {"isnumeric", CharClass<IsDigitCp>},
      {"isalpha", CharClass<IsAlphaCp>},
      {"isalnum", CharClass<IsAlnumCp>},
      {"isspace", CharClass<IsPySpace>},
      {"islower", CaseTest<false>},
      {"isupper", CaseTest<true>},
      {"center", Pad<'^'>},
      {"ljust", Pad<'<'>},
      {"rjust", Pad<'>'>},
      {"zfill", Pad<'0'>},
      {"removeprefix", RemoveAffix<true>},
      {"removesuffix", RemoveAffix<false>},
  };
  static const std::unordered_map<std::string_view, Method> kList = {
      {"append", Append}, {"extend", Extend}, {"index", ListIndex}, {"count", ListCount}};
  static const std::unordered_map<std::string_view, Method> kTuple = {{"index", ListIndex}, {"count", ListCount}};
  static const std::unordered_map<std::string_view, Method> kDict = {
      {"items", DictItems}, {"keys", DictKeys}, {"values", DictValues}, {"get", DictGet}};
  switch (self.kind()) {
    case Value::Kind::kString: return &kString;
    case Value::Kind::kList: return self.list().is_tuple ? &kTuple : &kList;
    case Value::Kind::kDict: return &kDict;
    default: return nullptr;
  }
}

}  // namespace

bool HasMethod(const Value& self, std::string_view name) {
  const auto* table = MethodTable(self);
  return table != nullptr && table->count(name) > 0;
}

Value CallMethod(const Value& self, std::string_view name, CallArgs& args) {
  if (const auto* table = MethodTable(self)) {
    auto it = table->find(name);
    if (it != table->end()) return it->second(self, args);
  }
  ThrowEval("'{}' object has no method '{}'", TypeName(self), name);
}

}  // namespace infernix::jinja
