// Values of the template language, with Python semantics (templates are written against Jinja2 on
// CPython): None, bool, int (int64), float (double), str (UTF-8), list / tuple, dict (insertion
// ordered), Jinja's namespace and loop objects, callables, and Undefined.
//
// Containers have reference semantics, as in Python: copying a Value shares the list / dict, so
// `list.append` and `{% set ns.x = ... %}` are seen through every reference. Values are not
// thread-safe; each render builds its own.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace infernix::jinja {

class Interpreter;
class Value;

// Recursive operations on values (printing, tojson, equality, conversion from JSON) give up with an
// error beyond this nesting depth instead of overflowing the stack.
inline constexpr int kMaxValueDepth = 256;
// Bytes of any string a render makes (the output, a captured block, a concatenation, a repetition): far
// past any prompt, short of exhausting memory.
inline constexpr size_t kMaxTextBytes = size_t{64} << 20;
// Items of any list a render makes by +, *, append or extend (a list doubled in a loop would otherwise
// take gigabytes in a few dozen steps); a request body cannot hold half as many messages.
inline constexpr size_t kMaxListItems = size_t{1} << 20;

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// A built-in function, bound method or macro. Reports errors by throwing EvalError (or
// infernix::Error when it knows the template position, as macros do).
using NativeFunction = std::function<Value(Interpreter&, CallArgs&)>;

enum class UndefinedKind : uint8_t {
  kVariable,  // a name that is not defined: printing it is an error
  kMember,    // a missing attribute / key / index of a defined value: prints as "" (as Jinja does)
  kOther,     // `a if false`, loop.previtem on the first item, ...: prints as ""
};

struct UndefinedInfo {
  std::string hint;  // what is undefined, for error messages ("'foo' is undefined")
  UndefinedKind kind = UndefinedKind::kOther;
};

struct ListObj;
struct DictObj;
struct NamespaceObj;
struct LoopObj;
struct CallableObj;

class Value {
 public:
  // The order matches the variant alternatives below.
  enum class Kind : uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kLoop, kCallable };

  Value() = default;  // undefined
  static Value Undefined(std::string hint, UndefinedKind kind = UndefinedKind::kOther);
  static Value None() { return Value(nullptr); }
  static Value Bool(bool b) { return Value(b); }
  static Value Int(int64_t i) { return Value(i); }
  static Value Float(double d) { return Value(d); }
  static Value String(std::string s) { return Value(std::move(s)); }
  static Value List(std::vector<Value> items = {});
  static Value Tuple(std::vector<Value> items);
  static Value Dict();
  static Value Namespace();
  static Value Loop(std::shared_ptr<std::vector<Value>> items, size_t index);
  static Value Function(std::string name, NativeFunction fn);

  Kind kind() const { return static_cast<Kind>(data_.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_list() const { return kind() == Kind::kList; }
  bool is_dict() const { return kind() == Kind::kDict; }
  // bool, int or float (Python's bool is an int)
  bool is_number() const { return kind() == Kind::kBool || kind() == Kind::kInt || kind() == Kind::kFloat; }
  bool is_integral() const { return kind() == Kind::kBool || kind() == Kind::kInt; }

  const UndefinedInfo& undefined() const { return std::get<UndefinedInfo>(data_); }
  bool AsBool() const { return std::get<bool>(data_); }
  int64_t AsInt() const;   // bool or int
  double AsFloat() const;  // any number
  const std::string& AsString() const { return std::get<std::string>(data_); }
  ListObj& list() const { return *std::get<std::shared_ptr<ListObj>>(data_); }
  DictObj& dict() const { return *std::get<std::shared_ptr<DictObj>>(data_); }
  NamespaceObj& ns() const { return *std::get<std::shared_ptr<NamespaceObj>>(data_); }
  LoopObj& loop() const { return *std::get<std::shared_ptr<LoopObj>>(data_); }
  const CallableObj& callable() const { return *std::get<std::shared_ptr<CallableObj>>(data_); }
  // Identity of a container (list, dict, namespace, loop, callable); nullptr for scalars.
  const void* container() const;

 private:
  friend void ReleaseIteratively(std::vector<Value>&& values);
  template <typename T>
    requires(!std::is_same_v<std::decay_t<T>, Value>)
  explicit Value(T&& v) : data_(std::forward<T>(v)) {}

  std::variant<UndefinedInfo, std::nullptr_t, bool, int64_t, double, std::string, std::shared_ptr<ListObj>,
               std::shared_ptr<DictObj>, std::shared_ptr<NamespaceObj>, std::shared_ptr<LoopObj>,
               std::shared_ptr<CallableObj>>
      data_;
};

// Destroys values without recursing into containers they solely own, so that dropping a deeply
// nested structure cannot overflow the stack. Containers call it from their destructors.
void ReleaseIteratively(std::vector<Value>&& values);

struct ListObj {
  std::vector<Value> items;
  bool is_tuple = false;
  ~ListObj() { ReleaseIteratively(std::move(items)); }
};

struct DictObj {
  std::vector<std::pair<Value, Value>> entries;
  const Value* Find(const Value& key) const;
  const Value* Find(std::string_view key) const;
  // Inserts or replaces; throws EvalError for an unhashable key (list, dict, ...).
  void Set(Value key, Value value);
  ~DictObj();
};

struct NamespaceObj {
  DictObj attrs;
};

// Jinja's `loop` variable for item `index` of `items` (the items left after the loop's filter).
struct LoopObj {
  std::shared_ptr<std::vector<Value>> items;
  size_t index = 0;
  ~LoopObj();
};

struct CallableObj {
  std::string name;
  NativeFunction fn;
};

// Python truth value (Undefined is false).
bool Truthy(const Value& v);
// Python ==. Numbers compare across bool / int / float.
bool Equals(const Value& a, const Value& b);
// Python ordering (<0, 0, >0) for numbers, strings and lists of those; throws EvalError otherwise.
int Compare(const Value& a, const Value& b);
// Python type name: 'str', 'int', 'list', 'dict', 'NoneType', 'Undefined', ...
std::string_view TypeName(const Value& v);
// Whether `needle` (a container identity) is reachable from `haystack`: storing haystack inside
// needle would create a reference cycle.
bool ContainsContainer(const Value& haystack, const void* needle);

// Python str(): strings unchanged, None -> "None", True -> "True", floats as repr(), containers
// as repr(). Undefined -> "" (the caller decides whether that is allowed; see ToText).
std::string Str(const Value& v);
// Python repr(): strings quoted as Python quotes them.
std::string Repr(const Value& v);
// Python repr() of a float: shortest round-trip digits, "1.0", "1e+16", "1e-05", "inf", "nan".
std::string FormatFloat(double d);

}  // namespace infernix::jinja
