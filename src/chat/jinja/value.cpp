#include "chat/jinja/value.h"

#include "chat/jinja/eval_error.h"

namespace infernix::jinja {

Value Value::Undefined(std::string hint, UndefinedKind kind) { return Value(UndefinedInfo{std::move(hint), kind}); }

Value Value::List(std::vector<Value> items) {
  auto list = std::make_shared<ListObj>();
  list->items = std::move(items);
  return Value(std::move(list));
}

Value Value::Tuple(std::vector<Value> items) {
  Value v = List(std::move(items));
  v.list().is_tuple = true;
  return v;
}

Value Value::Dict() { return Value(std::make_shared<DictObj>()); }
Value Value::Namespace() { return Value(std::make_shared<NamespaceObj>()); }

Value Value::Loop(std::shared_ptr<std::vector<Value>> items, size_t index) {
  auto loop = std::make_shared<LoopObj>();
  loop->items = std::move(items);
  loop->index = index;
  return Value(std::move(loop));
}

Value Value::Function(std::string name, NativeFunction fn) {
  return Value(std::make_shared<CallableObj>(CallableObj{std::move(name), std::move(fn)}));
}

int64_t Value::AsInt() const {
  if (kind() == Kind::kBool) return AsBool() ? 1 : 0;
  return std::get<int64_t>(data_);
}

double Value::AsFloat() const {
  if (kind() == Kind::kFloat) return std::get<double>(data_);
  return static_cast<double>(AsInt());
}

const void* Value::container() const {
  switch (kind()) {
    case Kind::kList: return &list();
    case Kind::kDict: return &dict();
    case Kind::kNamespace: return &ns();
    case Kind::kLoop: return &loop();
    case Kind::kCallable: return &callable();
    default: return nullptr;
  }
}

void ReleaseIteratively(std::vector<Value>&& values) {
  std::vector<Value> pending = std::move(values);
  while (!pending.empty()) {
    Value v = std::move(pending.back());
    pending.pop_back();
    // When v is the last owner of a container, its children move to `pending` before it dies.
    if (auto* list = std::get_if<std::shared_ptr<ListObj>>(&v.data_); list && list->use_count() == 1) {
      for (auto& item : (*list)->items) pending.push_back(std::move(item));
      (*list)->items.clear();
    } else if (auto* dict = std::get_if<std::shared_ptr<DictObj>>(&v.data_); dict && dict->use_count() == 1) {
      for (auto& entry : (*dict)->entries) pending.push_back(std::move(entry.second));
      (*dict)->entries.clear();
    } else if (auto* ns = std::get_if<std::shared_ptr<NamespaceObj>>(&v.data_); ns && ns->use_count() == 1) {
      for (auto& entry : (*ns)->attrs.entries) pending.push_back(std::move(entry.second));
      (*ns)->attrs.entries.clear();
    }
  }
}

DictObj::~DictObj() {
  std::vector<Value> values;
  values.reserve(entries.size());
  for (auto& entry : entries) values.push_back(std::move(entry.second));
  ReleaseIteratively(std::move(values));
}

LoopObj::~LoopObj() {
  if (items && items.use_count() == 1) ReleaseIteratively(std::move(*items));
}

const Value* DictObj::Find(std::string_view key) const {
  for (const auto& [k, v] : entries)
    if (k.is_string() && k.AsString() == key) return &v;
  return nullptr;
}

const Value* DictObj::Find(const Value& key) const {
  if (key.is_string()) return Find(std::string_view(key.AsString()));
  for (const auto& [k, v] : entries)
    if (Equals(k, key)) return &v;
  return nullptr;
}

void DictObj::Set(Value key, Value value) {
  bool hashable = key.is_none() || key.is_number() || key.is_string() || (key.is_list() && key.list().is_tuple);
  if (!hashable) ThrowEval("unhashable type: '{}' cannot be a dict key", TypeName(key));
  if (auto* existing = const_cast<Value*>(Find(key))) {
    *existing = std::move(value);
    return;
  }
  entries.emplace_back(std::move(key), std::move(value));
}

bool Truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return false;
    case Value::Kind::kBool: return v.AsBool();
    case Value::Kind::kInt: return v.AsInt() != 0;
    case Value::Kind::kFloat: return v.AsFloat() != 0.0;
    case Value::Kind::kString: return !v.AsString().empty();
    case Value::Kind::kList: return !v.list().items.empty();
    case Value::Kind::kDict: return !v.dict().entries.empty();
    default: return true;
  }
}

namespace {

bool EqualsAt(const Value& a, const Value& b, int depth) {
  if (depth > kMaxValueDepth) ThrowEval("values nested deeper than {} levels cannot be compared", kMaxValueDepth);
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.AsInt() == b.AsInt();
    return a.AsFloat() == b.AsFloat();
  }
  if (a.kind() != b.kind()) return false;
  if (a.container() != nullptr && a.container() == b.container()) return true;  // Python: `is` implies ==
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return a.AsString() == b.AsString();
    case Value::Kind::kList: {
      const auto &x = a.list(), &y = b.list();
      if (x.is_tuple != y.is_tuple || x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i)
        if (!EqualsAt(x.items[i], y.items[i], depth + 1)) return false;
      return true;
    }
    case Value::Kind::kDict: {
      const auto &x = a.dict(), &y = b.dict();
      if (x.entries.size() != y.entries.size()) return false;
      for (const auto& [key, value] : x.entries) {
        const Value* other = y.Find(key);
        if (other == nullptr || !EqualsAt(value, *other, depth + 1)) return false;
      }
      return true;
    }
    default: return a.container() == b.container();
  }
}

bool ContainsAt(const Value& haystack, const void* needle, int depth) {
  if (haystack.container() == needle) return true;
  if (depth > kMaxValueDepth) ThrowEval("values nested deeper than {} levels are not supported", kMaxValueDepth);
  const std::vector<std::pair<Value, Value>>* entries = nullptr;
  switch (haystack.kind()) {
    case Value::Kind::kList:
      for (const auto& item : haystack.list().items)
        if (ContainsAt(item, needle, depth + 1)) return true;
      return false;
    case Value::Kind::kDict: entries = &haystack.dict().entries; break;
    case Value::Kind::kNamespace: entries = &haystack.ns().attrs.entries; break;
    default: return false;
  }
  for (const auto& entry : *entries)
    if (ContainsAt(entry.second, needle, depth + 1)) return true;
  return false;
}

}  // namespace

bool Equals(const Value& a, const Value& b) { return EqualsAt(a, b, 0); }

int Compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.AsInt() < b.AsInt() ? -1 : a.AsInt() > b.AsInt() ? 1 : 0;
    double x = a.AsFloat(), y = b.AsFloat();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    int c = a.AsString().compare(b.AsString());  // UTF-8 byte order is code point order
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_list() && b.is_list() && a.list().is_tuple == b.list().is_tuple) {
    const auto &x = a.list().items, &y = b.list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (!Equals(x[i], y[i])) return Compare(x[i], y[i]);
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  ThrowEval("cannot order values of types '{}' and '{}'", TypeName(a), TypeName(b));
}

std::string_view TypeName(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "Undefined";
    case Value::Kind::kNone: return "NoneType";
    case Value::Kind::kBool: return "bool";
    case Value::Kind::kInt: return "int";
    case Value::Kind::kFloat: return "float";
    case Value::Kind::kString: return "str";
    case Value::Kind::kList: return v.list().is_tuple ? "tuple" : "list";
    case Value::Kind::kDict: return "dict";
    case Value::Kind::kNamespace: return "Namespace";
    case Value::Kind::kLoop: return "LoopContext";
    case Value::Kind::kCallable: return "function";
  }
  return "?";
}

bool ContainsContainer(const Value& haystack, const void* needle) {
  return needle != nullptr && ContainsAt(haystack, needle, 0);
}

}  // namespace infernix::jinja
