// Global functions (Jinja's defaults plus transformers' raise_exception and strftime_now), and
// argument binding shared by all built-ins.
#include <cmath>
#include <ctime>

#include "chat/jinja/builtins.h"
#include "chat/jinja/operators.h"

namespace infernix::jinja {

std::vector<Value> BindArgs(std::string_view function, const CallArgs& args, std::initializer_list<std::string_view> names,
                            size_t required) {
  std::vector<Value> out(names.size());
  std::vector<bool> given(names.size(), false);
  if (args.positional.size() > names.size())
    ThrowEval("{} takes at most {} argument(s), {} given", function, names.size(), args.positional.size());
  for (size_t i = 0; i < args.positional.size(); ++i) {
    out[i] = args.positional[i];
    given[i] = true;
  }
  for (const auto& [name, value] : args.keyword) {
    auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end()) ThrowEval("{} got an unexpected keyword argument '{}'", function, name);
    size_t index = static_cast<size_t>(it - names.begin());
    if (given[index]) ThrowEval("{} got multiple values for argument '{}'", function, name);
    out[index] = value;
    given[index] = true;
  }
  for (size_t i = 0; i < required; ++i)
    if (!given[i]) ThrowEval("{} is missing its argument '{}'", function, *(names.begin() + i));
  return out;
}

int64_t IntArg(std::string_view function, std::string_view param, const Value& v) {
  if (!v.is_integral()) ThrowEval("{}: argument '{}' must be an integer, not '{}'", function, param, TypeName(v));
  return v.AsInt();
}

const std::string& StringArg(std::string_view function, std::string_view param, const Value& v) {
  if (!v.is_string()) ThrowEval("{}: argument '{}' must be a string, not '{}'", function, param, TypeName(v));
  return v.AsString();
}

namespace {

// Like Jinja's sandbox, refuse ranges that would take a lot of memory.
constexpr int64_t kMaxRange = 100000;

Value Range(Interpreter&, CallArgs& args) {
  if (!args.keyword.empty()) ThrowEval("range() takes no keyword arguments");
  size_t n = args.positional.size();
  if (n < 1 || n > 3) ThrowEval("range() takes 1 to 3 arguments, {} given", n);
  std::vector<int64_t> v;
  for (const auto& arg : args.positional) v.push_back(IntArg("range()", "bound", arg));
  int64_t start = n == 1 ? 0 : v[0], stop = n == 1 ? v[0] : v[1], step = n == 3 ? v[2] : 1;
  if (step == 0) ThrowEval("range() step must not be zero");
  // Counted in double: the int64 difference could overflow.
  double span = step > 0 ? static_cast<double>(stop) - static_cast<double>(start)
                         : static_cast<double>(start) - static_cast<double>(stop);
  double count = span <= 0 ? 0 : std::ceil(span / std::abs(static_cast<double>(step)));
  if (count > kMaxRange) ThrowEval("range() of {:.0f} items is too large (the limit is {})", count, kMaxRange);
  std::vector<Value> items;
  for (int64_t i = 0; i < static_cast<int64_t>(count); ++i) items.push_back(Value::Int(start + i * step));
  return Value::List(std::move(items));
}

// dict(mapping or pairs, **kwargs) into `dict`.
void FillDict(std::string_view function, DictObj& dict, CallArgs& args) {
  if (args.positional.size() > 1) ThrowEval("{} takes at most 1 positional argument", function);
  if (!args.positional.empty()) {
    const Value& source = args.positional[0];
    if (source.is_dict()) {
      for (const auto& [key, value] : source.dict().entries) dict.Set(key, value);
    } else {
      for (const Value& pair : Iterate(source)) {
        if (!pair.is_list() || pair.list().items.size() != 2)
          ThrowEval("{}: each item of a sequence argument must be a (key, value) pair", function);
        dict.Set(pair.list().items[0], pair.list().items[1]);
      }
    }
  }
  for (auto& [name, value] : args.keyword) dict.Set(Value::String(name), std::move(value));
}

Value MakeNamespace(Interpreter&, CallArgs& args) {
  Value ns = Value::Namespace();
  FillDict("namespace()", ns.ns().attrs, args);
  return ns;
}

Value MakeDict(Interpreter&, CallArgs& args) {
  Value dict = Value::Dict();
  FillDict("dict()", dict.dict(), args);
  return dict;
}

Value RaiseException(Interpreter&, CallArgs& args) {
  auto a = BindArgs("raise_exception()", args, {"message"}, 0);
  ThrowEval("template raised an error: {}", a[0].is_undefined() ? std::string("(no message)") : Str(a[0]));
}

// transformers' strftime_now: datetime.now().strftime(format), in local time.
Value StrftimeNow(Interpreter&, CallArgs& args) {
  auto a = BindArgs("strftime_now()", args, {"format"}, 1);
  const std::string& format = StringArg("strftime_now()", "format", a[0]);
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::string out(256 + 4 * format.size(), '\0');
  size_t n = format.empty() ? 0 : std::strftime(out.data(), out.size(), format.c_str(), &local);
  if (n == 0 && !format.empty()) ThrowEval("strftime_now(): format '{}' gives an empty or too long result", format);
  out.resize(n);
  return Value::String(std::move(out));
}

// joiner(sep): a function returning "" on its first call and `sep` afterwards.
Value MakeJoiner(Interpreter&, CallArgs& args) {
  auto a = BindArgs("joiner()", args, {"sep"}, 0);
  std::string separator = a[0].is_undefined() ? ", " : Str(a[0]);
  auto used = std::make_shared<bool>(false);
  return Value::Function("joiner", [separator, used](Interpreter&, CallArgs&) {
    return Value::String(std::exchange(*used, true) ? separator : "");
  });
}

}  // namespace

void AddGlobals(Frame& frame) {
  frame.Set("range", Value::Function("range", Range));
  frame.Set("namespace", Value::Function("namespace", MakeNamespace));
  frame.Set("dict", Value::Function("dict", MakeDict));
  frame.Set("joiner", Value::Function("joiner", MakeJoiner));
  frame.Set("raise_exception", Value::Function("raise_exception", RaiseException));
  frame.Set("strftime_now", Value::Function("strftime_now", StrftimeNow));
}

}  // namespace infernix::jinja
