// Filters over sequences (filters_sequence.cpp), registered by filters.cpp.
#pragma once

#include "chat/jinja/builtins.h"

namespace infernix::jinja {

// Jinja's make_attrgetter: `attribute` is a name, a dotted path ("a.b", "items.0") or an integer;
// each part is looked up as an item first, then as an attribute.
Value LookupAttribute(Interpreter& in, const Value& item, const Value& attribute);

Value FilterFirst(Interpreter& in, Value& input, CallArgs& args);
Value FilterLast(Interpreter& in, Value& input, CallArgs& args);
Value FilterLength(Interpreter& in, Value& input, CallArgs& args);
Value FilterList(Interpreter& in, Value& input, CallArgs& args);
Value FilterItems(Interpreter& in, Value& input, CallArgs& args);
Value FilterJoin(Interpreter& in, Value& input, CallArgs& args);
Value FilterMap(Interpreter& in, Value& input, CallArgs& args);
Value FilterSelect(Interpreter& in, Value& input, CallArgs& args);
Value FilterReject(Interpreter& in, Value& input, CallArgs& args);
Value FilterSelectAttr(Interpreter& in, Value& input, CallArgs& args);
Value FilterRejectAttr(Interpreter& in, Value& input, CallArgs& args);
Value FilterUnique(Interpreter& in, Value& input, CallArgs& args);
Value FilterSort(Interpreter& in, Value& input, CallArgs& args);
Value FilterDictSort(Interpreter& in, Value& input, CallArgs& args);
Value FilterReverse(Interpreter& in, Value& input, CallArgs& args);
Value FilterSum(Interpreter& in, Value& input, CallArgs& args);
Value FilterMin(Interpreter& in, Value& input, CallArgs& args);
Value FilterMax(Interpreter& in, Value& input, CallArgs& args);
Value FilterBatch(Interpreter& in, Value& input, CallArgs& args);

}  // namespace infernix::jinja
