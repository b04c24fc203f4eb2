// Jinja tests: `x is defined`, `x is divisibleby 3`, ...
#include <unordered_map>

#include "chat/jinja/builtins.h"
#include "chat/jinja/operators.h"
#include "chat/jinja/utf8.h"

namespace infernix::jinja {

namespace {

// A test without arguments that only looks at the value.
template <bool (*Predicate)(const Value&)>
bool Simple(Interpreter&, const Value& v, CallArgs& args) {
  BindArgs("test", args, {}, 0);
  return Predicate(v);
}

template <Value::Kind kind>
bool IsKind(const Value& v) {
  return v.kind() == kind;
}

bool IsDefined(const Value& v) { return !v.is_undefined(); }
bool IsUndefined(const Value& v) { return v.is_undefined(); }
bool IsTrue(const Value& v) { return v.kind() == Value::Kind::kBool && v.AsBool(); }
bool IsFalse(const Value& v) { return v.kind() == Value::Kind::kBool && !v.AsBool(); }
bool IsNumber(const Value& v) { return v.is_number(); }
// Jinja: anything with a length and items (str, list, tuple, dict; Undefined too).
bool IsSequence(const Value& v) { return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined(); }
bool IsOdd(const Value& v) { return Equals(BinaryOperation(BinaryOp::kMod, v, Value::Int(2)), Value::Int(1)); }
bool IsEven(const Value& v) { return Equals(BinaryOperation(BinaryOp::kMod, v, Value::Int(2)), Value::Int(0)); }
bool IsEscaped(const Value&) { return false; }
bool IsFilterName(const Value& v) { return v.is_string() && FindFilter(v.AsString()) != nullptr; }
bool IsTestName(const Value& v) { return v.is_string() && FindTest(v.AsString()) != nullptr; }

// Python's str.islower / isupper: some cased character, and none of the other case.
bool IsLower(const Value& v) {
  std::string s = ToText(v);
  return ToLower(s) == s && ToUpper(s) != s;
}

bool IsUpper(const Value& v) {
  std::string s = ToText(v);
  return ToUpper(s) == s && ToLower(s) != s;
}

bool TestDivisibleBy(Interpreter&, const Value& v, CallArgs& args) {
  Value n = BindArgs("divisibleby", args, {"num"}, 1)[0];
  return Equals(BinaryOperation(BinaryOp::kMod, v, n), Value::Int(0));
}

bool TestIn(Interpreter&, const Value& v, CallArgs& args) { return Contains(BindArgs("in", args, {"seq"}, 1)[0], v); }

template <CompareOp op>
bool TestCompare(Interpreter&, const Value& v, CallArgs& args) {
  return CompareValues(op, v, BindArgs("comparison test", args, {"other"}, 1)[0]);
}

// Python's `is`: the same container, or the same singleton / equal scalar of the same type.
bool TestSameAs(Interpreter&, const Value& v, CallArgs& args) {
  Value other = BindArgs("sameas", args, {"other"}, 1)[0];
  if (v.kind() != other.kind()) return false;
  if (v.container() != nullptr) return v.container() == other.container();
  return Equals(v, other);
}

}  // namespace

TestFunction FindTest(std::string_view name) {
  static const std::unordered_map<std::string_view, TestFunction> kTests = {
      {"defined", Simple<IsDefined>},
      {"undefined", Simple<IsUndefined>},
      {"none", Simple<IsKind<Value::Kind::kNone>>},
      {"boolean", Simple<IsKind<Value::Kind::kBool>>},
      {"true", Simple<IsTrue>},
      {"false", Simple<IsFalse>},
      {"integer", Simple<IsKind<Value::Kind::kInt>>},
      {"float", Simple<IsKind<Value::Kind::kFloat>>},
      {"number", Simple<IsNumber>},
      {"string", Simple<IsKind<Value::Kind::kString>>},
      {"mapping", Simple<IsKind<Value::Kind::kDict>>},
      {"sequence", Simple<IsSequence>},
      {"iterable", Simple<IsSequence>},
      {"callable", Simple<IsKind<Value::Kind::kCallable>>},
      {"odd", Simple<IsOdd>},
      {"even", Simple<IsEven>},
      {"lower", Simple<IsLower>},
      {"upper", Simple<IsUpper>},
      {"escaped", Simple<IsEscaped>},
      {"filter", Simple<IsFilterName>},
      {"test", Simple<IsTestName>},
      {"divisibleby", TestDivisibleBy},
      {"in", TestIn},
      {"sameas", TestSameAs},
      {"eq", TestCompare<CompareOp::kEq>},
      {"equalto", TestCompare<CompareOp::kEq>},
      {"==", TestCompare<CompareOp::kEq>},
      {"ne", TestCompare<CompareOp::kNe>},
      {"!=", TestCompare<CompareOp::kNe>},
      {"lt", TestCompare<CompareOp::kLt>},
      {"lessthan", TestCompare<CompareOp::kLt>},
      {"<", TestCompare<CompareOp::kLt>},
      {"le", TestCompare<CompareOp::kLe>},
      {"<=", TestCompare<CompareOp::kLe>},
      {"gt", TestCompare<CompareOp::kGt>},
      {"greaterthan", TestCompare<CompareOp::kGt>},
      {">", TestCompare<CompareOp::kGt>},
      {"ge", TestCompare<CompareOp::kGe>},
      {">=", TestCompare<CompareOp::kGe>},
  };
  auto it = kTests.find(name);
  return it == kTests.end() ? nullptr : it->second;
}

}  // namespace infernix::jinja
