// Python semantics of the template operators. All throw EvalError for operands Python would reject
// (TypeError, ZeroDivisionError) and for int64 overflow (Python's ints are unbounded; ours are not).
#pragma once

#include <vector>

#include "chat/jinja/ast.h"
#include "chat/jinja/value.h"

namespace infernix::jinja {

// + - * / // % ** (not `and`, `or`, `~`, which the interpreter evaluates itself).
Value BinaryOperation(BinaryOp op, const Value& a, const Value& b);
// Throw EvalError (kOutOfRange) for a string longer than kMaxTextBytes, a list longer than kMaxListItems
// (value.h).
void CheckTextSize(size_t bytes);
void CheckListSize(size_t items);
Value Negate(const Value& v);
// ==, !=, <, <=, >, >=, in, not in.
bool CompareValues(CompareOp op, const Value& a, const Value& b);
// `item in container`: substring, list element, dict key. Undefined contains nothing.
bool Contains(const Value& container, const Value& item);
// object[start:stop:step] for lists, tuples and strings (by code point); None parts take defaults.
Value SliceValue(const Value& object, const Value& start, const Value& stop, const Value& step);
// The items a for loop visits: list / tuple elements, dict keys, string code points; nothing for
// Undefined.
std::vector<Value> Iterate(const Value& v);

}  // namespace infernix::jinja
