// Filters over lists, dicts and strings as sequences.
#include <algorithm>

#include "chat/jinja/filters_internal.h"
#include "chat/jinja/operators.h"
#include "chat/jinja/utf8.h"

namespace infernix::jinja {

Value LookupAttribute(Interpreter& in, const Value& item, const Value& attribute) {
  if (attribute.is_integral()) return in.GetItem(item, attribute);
  std::string path = Str(attribute);
  Value current = item;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool digits = !part.empty() && part.size() < 18 &&
                  std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    current = in.GetItem(current, digits ? Value::Int(std::stoll(part)) : Value::String(part));
    if (dot == std::string::npos) return current;
    start = dot + 1;
  }
}

namespace {

bool Given(const Value& v) { return !v.is_undefined() && !v.is_none(); }

// Jinja lower-cases strings before comparing them unless case_sensitive is set.
Value IgnoreCase(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.is_string() ? Value::String(ToLower(v.AsString())) : v;
}

// The sort / comparison key of an item: its attribute if one is named, then IgnoreCase.
Value SortKey(Interpreter& in, const Value& item, const Value& attribute, bool case_sensitive) {
  return IgnoreCase(Given(attribute) ? LookupAttribute(in, item, attribute) : item, case_sensitive);
}

// The items a filter visits; Jinja's filters treat a falsy input (None, "") as empty.
std::vector<Value> Items(const Value& input) { return Truthy(input) ? Iterate(input) : std::vector<Value>{}; }

// Jinja's select / reject / selectattr / rejectattr.
Value SelectOrReject(Interpreter& in, Value& input, CallArgs& args, bool by_attribute, bool keep) {
  std::string_view function = by_attribute ? (keep ? "selectattr" : "rejectattr") : (keep ? "select" : "reject");
  size_t next = 0;
  Value attribute;
  if (by_attribute) {
    if (args.positional.empty()) ThrowEval("{} needs the name of an attribute", function);
    attribute = args.positional[next++];
  }
  std::string test_name;
  CallArgs test_args;
  if (next < args.positional.size()) {
    test_name = StringArg(function, "test", args.positional[next++]);
    test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(next), args.positional.end());
    test_args.keyword = args.keyword;
  } else if (!args.keyword.empty()) {
    ThrowEval("{}: keyword arguments need a test name", function);
  }
  std::vector<Value> kept;
  for (const Value& item : Items(input)) {
    Value subject = by_attribute ? LookupAttribute(in, item, attribute) : item;
    CallArgs call_args = test_args;
    bool passed = test_name.empty() ? Truthy(subject) : in.ApplyTest(test_name, subject, call_args);
    if (passed == keep) kept.push_back(item);
  }
  return Value::List(std::move(kept));
}

Value MinMax(Interpreter& in, Value& input, CallArgs& args, bool max) {
  auto a = BindArgs(max ? "max" : "min", args, {"case_sensitive", "attribute"}, 0);
  std::vector<Value> items = Iterate(input);
  if (items.empty()) return Value::Undefined("no aggregated item: the sequence is empty");
  size_t best = 0;
  Value best_key = SortKey(in, items[0], a[1], Truthy(a[0]));
  for (size_t i = 1; i < items.size(); ++i) {
    Value key = SortKey(in, items[i], a[1], Truthy(a[0]));
    int c = Compare(key, best_key);
    if (max ? c > 0 : c < 0) {
      best = i;
      best_key = std::move(key);
    }
  }
  return items[best];
}

}  // namespace

Value FilterFirst(Interpreter&, Value& input, CallArgs& args) {
  BindArgs("first", args, {}, 0);
  std::vector<Value> items = input.is_list() ? std::vector<Value>{} : Iterate(input);
  const std::vector<Value>& seq = input.is_list() ? input.list().items : items;
  return seq.empty() ? Value::Undefined("no first item: the sequence is empty") : seq.front();
}

Value FilterLast(Interpreter&, Value& input, CallArgs& args) {
  BindArgs("last", args, {}, 0);
  std::vector<Value> items = input.is_list() ? std::vector<Value>{} : Iterate(input);
  const std::vector<Value>& seq = input.is_list() ? input.list().items : items;
  return seq.empty() ? Value::Undefined("no last item: the sequence is empty") : seq.back();
}

Value FilterLength(Interpreter&, Value& input, CallArgs& args) {
  BindArgs("length", args, {}, 0);
  switch (input.kind()) {
    case Value::Kind::kUndefined: return Value::Int(0);
    case Value::Kind::kString: return Value::Int(static_cast<int64_t>(CountCodePoints(input.AsString())));
    case Value::Kind::kList: return Value::Int(static_cast<int64_t>(input.list().items.size()));
    case Value::Kind::kDict: return Value::Int(static_cast<int64_t>(input.dict().entries.size()));
    default: ThrowEval("length: object of type '{}' has no length", TypeName(input));
  }
}

Value FilterList(Interpreter&, Value& input, CallArgs& args) {
  BindArgs("list", args, {}, 0);
  return Value::List(Iterate(input));
}

Value FilterItems(Interpreter&, Value& input, CallArgs& args) {
  BindArgs("items", args, {}, 0);
  if (input.is_undefined()) return Value::List();
  if (!input.is_dict()) ThrowEval("items: expected a dict, got '{}'", TypeName(input));
  std::vector<Value> pairs;
  for (const auto& [key, value] : input.dict().entries) pairs.push_back(Value::Tuple({key, value}));
  return Value::List(std::move(pairs));
}

Value FilterJoin(Interpreter& in, Value& input, CallArgs& args) {
  auto a = BindArgs("join", args, {"d", "attribute"}, 0);
  std::string separator = a[0].is_undefined() ? "" : ToText(a[0]);
  std::string out;
  bool first = true;
  for (const Value& item : Iterate(input)) {
    if (!first) out += separator;
    first = false;
    out += ToText(Given(a[1]) ? LookupAttribute(in, item, a[1]) : item);
    CheckTextSize(out.size());
  }
  return Value::String(std::move(out));
}

// map('filter', args...) or map(attribute='name', default=value).
Value FilterMap(Interpreter& in, Value& input, CallArgs& args) {
  std::vector<Value> out;
  if (args.positional.empty()) {
    auto a = BindArgs("map", args, {"attribute", "default"}, 1);
    for (const Value& item : Items(input)) {
      Value v = LookupAttribute(in, item, a[0]);
      out.push_back(v.is_undefined() && Given(a[1]) ? a[1] : v);
    }
    return Value::List(std::move(out));
  }
  std::string filter = StringArg("map", "filter", args.positional[0]);
  CallArgs filter_args;
  filter_args.positional.assign(args.positional.begin() + 1, args.positional.end());
  filter_args.keyword = args.keyword;
  for (const Value& item : Items(input)) {
    CallArgs call_args = filter_args;
    out.push_back(in.ApplyFilter(filter, item, call_args));
  }
  return Value::List(std::move(out));
}

Value FilterSelect(Interpreter& in, Value& input, CallArgs& args) { return SelectOrReject(in, input, args, false, true); }
Value FilterReject(Interpreter& in, Value& input, CallArgs& args) { return SelectOrReject(in, input, args, false, false); }
Value FilterSelectAttr(Interpreter& in, Value& input, CallArgs& args) {
  return SelectOrReject(in, input, args, true, true);
}
Value FilterRejectAttr(Interpreter& in, Value& input, CallArgs& args) {
  return SelectOrReject(in, input, args, true, false);
}

Value FilterUnique(Interpreter& in, Value& input, CallArgs& args) {
  auto a = BindArgs("unique", args, {"case_sensitive", "attribute"}, 0);
  std::vector<Value> out, seen;
  for (const Value& item : Iterate(input)) {
    Value key = SortKey(in, item, a[1], Truthy(a[0]));
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return Equals(s, key); })) continue;
    seen.push_back(std::move(key));
    out.push_back(item);
  }
  return Value::List(std::move(out));
}

Value FilterSort(Interpreter& in, Value& input, CallArgs& args) {
  auto a = BindArgs("sort", args, {"reverse", "case_sensitive", "attribute"}, 0);
  bool reverse = Truthy(a[0]);
  std::vector<std::pair<Value, Value>> keyed;  // (key, item)
  for (const Value& item : Iterate(input)) keyed.emplace_back(SortKey(in, item, a[2], Truthy(a[1])), item);
  // Stable in both directions, as Python's sorted(reverse=True) is.
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? Compare(y.first, x.first) < 0 : Compare(x.first, y.first) < 0;
  });
  std::vector<Value> out;
  for (auto& entry : keyed) out.push_back(std::move(entry.second));
  return Value::List(std::move(out));
}

Value FilterDictSort(Interpreter&, Value& input, CallArgs& args) {
  auto a = BindArgs("dictsort", args, {"case_sensitive", "by", "reverse"}, 0);
  if (!input.is_dict()) ThrowEval("dictsort: expected a dict, got '{}'", TypeName(input));
  std::string by = a[1].is_undefined() ? "key" : StringArg("dictsort", "by", a[1]);
  if (by != "key" && by != "value") ThrowEval("dictsort: 'by' must be 'key' or 'value', not '{}'", by);
  bool case_sensitive = Truthy(a[0]), reverse = Truthy(a[2]);
  std::vector<std::pair<Value, Value>> entries = input.dict().entries;
  auto key = [&](const std::pair<Value, Value>& e) { return IgnoreCase(by == "key" ? e.first : e.second, case_sensitive); };
  std::stable_sort(entries.begin(), entries.end(), [&](const auto& x, const auto& y) {
    return reverse ? Compare(key(y), key(x)) < 0 : Compare(key(x), key(y)) < 0;
  });
  std::vector<Value> out;
  for (auto& [k, v] : entries) out.push_back(Value::Tuple({k, v}));
  return Value::List(std::move(out));
}

Value FilterReverse(Interpreter&, Value& input, CallArgs& args) {
  BindArgs("reverse", args, {}, 0);
  if (input.is_string()) {
    std::vector<std::string> chars = SplitCodePoints(input.AsString());
    std::string out;
    for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
    return Value::String(std::move(out));
  }
  std::vector<Value> items = Iterate(input);
  std::reverse(items.begin(), items.end());
  return Value::List(std::move(items));
}

Value FilterSum(Interpreter& in, Value& input, CallArgs& args) {
  auto a = BindArgs("sum", args, {"attribute", "start"}, 0);
  Value total = a[1].is_undefined() ? Value::Int(0) : a[1];
  for (const Value& item : Iterate(input))
    total = BinaryOperation(BinaryOp::kAdd, total, Given(a[0]) ? LookupAttribute(in, item, a[0]) : item);
  return total;
}

Value FilterMin(Interpreter& in, Value& input, CallArgs& args) { return MinMax(in, input, args, false); }
Value FilterMax(Interpreter& in, Value& input, CallArgs& args) { return MinMax(in, input, args, true); }

Value FilterBatch(Interpreter&, Value& input, CallArgs& args) {
  auto a = BindArgs("batch", args, {"linecount", "fill_with"}, 1);
  int64_t size = IntArg("batch", "linecount", a[0]);
  if (size <= 0) ThrowEval("batch: linecount must be positive, not {}", size);
  std::vector<Value> batches, current;
  for (const Value& item : Iterate(input)) {
    current.push_back(item);
    if (static_cast<int64_t>(current.size()) == size) batches.push_back(Value::List(std::exchange(current, {})));
  }
  if (!current.empty()) {
    if (Given(a[1]))
      while (static_cast<int64_t>(current.size()) < size) current.push_back(a[1]);
    batches.push_back(Value::List(std::move(current)));
  }
  return Value::List(std::move(batches));
}

}  // namespace infernix::jinja
