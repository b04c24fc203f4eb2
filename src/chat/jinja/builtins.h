// The built-in library: filters, tests, methods of str / list / dict, and global functions. All
// report errors by throwing EvalError; the interpreter adds the template position.
#pragma once

#include <initializer_list>
#include <string_view>
#include <vector>

#include "chat/jinja/interpreter.h"
#include "chat/jinja/value.h"

namespace infernix::jinja {

using FilterFunction = Value (*)(Interpreter& in, Value& input, CallArgs& args);
using TestFunction = bool (*)(Interpreter& in, const Value& input, CallArgs& args);

// nullptr when there is no filter / test of that name (filters.cpp, jinja_tests.cpp).
FilterFunction FindFilter(std::string_view name);
TestFunction FindTest(std::string_view name);

// Python methods templates call on strings, lists and dicts (methods.cpp).
bool HasMethod(const Value& self, std::string_view name);
Value CallMethod(const Value& self, std::string_view name, CallArgs& args);

// range, namespace, dict, joiner, raise_exception, strftime_now (globals.cpp).
void AddGlobals(Frame& frame);

// Binds arguments Python-style to the parameters `names` (positional first, then by keyword).
// Returns one value per name; a parameter that was not given is Undefined. Throws EvalError naming
// `function` for too many positional arguments, unknown or repeated keywords, and missing required
// parameters (the first `required` names).
std::vector<Value> BindArgs(std::string_view function, const CallArgs& args, std::initializer_list<std::string_view> names,
                            size_t required);
// An integer argument (bool or int); throws EvalError naming the parameter otherwise.
int64_t IntArg(std::string_view function, std::string_view param, const Value& v);
// A string argument; throws EvalError naming the parameter otherwise.
const std::string& StringArg(std::string_view function, std::string_view param, const Value& v);

}  // namespace infernix::jinja
