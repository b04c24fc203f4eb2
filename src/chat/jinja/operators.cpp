#include "chat/jinja/operators.h"

#include <cmath>
#include <limits>

#include "chat/jinja/eval_error.h"
#include "chat/jinja/string_format.h"
#include "chat/jinja/utf8.h"

namespace infernix::jinja {

namespace {

std::string_view OperatorSymbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd: return "+";
    case BinaryOp::kSub: return "-";
    case BinaryOp::kMul: return "*";
    case BinaryOp::kDiv: return "/";
    case BinaryOp::kFloorDiv: return "//";
    case BinaryOp::kMod: return "%";
    case BinaryOp::kPow: return "**";
    default: return "?";
  }
}

[[noreturn]] void FailOperands(BinaryOp op, const Value& a, const Value& b) {
  for (const Value* v : {&a, &b})
    if (v->is_undefined())
      ThrowEval("cannot use an undefined value with '{}' ({})", OperatorSymbol(op), v->undefined().hint);
  ThrowEval("unsupported operand types for {}: '{}' and '{}'", OperatorSymbol(op), TypeName(a), TypeName(b));
}

[[noreturn]] void FailOverflow() { ThrowEval("integer overflow: the result does not fit in 64 bits"); }

int64_t CheckedAdd(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) FailOverflow();
  return r;
}

int64_t CheckedSub(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) FailOverflow();
  return r;
}

int64_t CheckedMul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) FailOverflow();
  return r;
}

Value Repeat(const Value& sequence, int64_t count) {
  uint64_t n = static_cast<uint64_t>(std::max<int64_t>(count, 0));
  if (sequence.is_string()) {
    // Divided, not multiplied: n * size can wrap around (then 'abcd' * 2**62 passed and ran forever).
    if (n != 0 && sequence.AsString().size() > kMaxTextBytes / n) ThrowEval("string repetition result too large");
    if (sequence.AsString().empty()) n = 0;  // '' * 2**62 is '' at once
    std::string out;
    for (uint64_t i = 0; i < n; ++i) out += sequence.AsString();
    return Value::String(std::move(out));
  }
  const ListObj& list = sequence.list();
  if (n != 0 && list.items.size() > kMaxListItems / n) ThrowEval("list repetition result too large");
  if (list.items.empty()) n = 0;
  std::vector<Value> items;
  for (uint64_t i = 0; i < n; ++i) items.insert(items.end(), list.items.begin(), list.items.end());
  return list.is_tuple ? Value::Tuple(std::move(items)) : Value::List(std::move(items));
}

bool IsSequence(const Value& v) { return v.is_string() || v.is_list(); }

// Python's float divmod: the floor quotient, and a remainder with the divisor's sign.
std::pair<double, double> FloatDivMod(double x, double y) {
  double mod = std::fmod(x, y);
  double div = (x - mod) / y;
  if (mod != 0) {
    if ((y < 0) != (mod < 0)) {
      mod += y;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, y);
  }
  double floor_div;
  if (div != 0) {
    floor_div = std::floor(div);
    if (div - floor_div > 0.5) floor_div += 1.0;
  } else {
    floor_div = std::copysign(0.0, x / y);
  }
  return {floor_div, mod};
}

Value IntPower(int64_t base, int64_t exponent) {
  int64_t result = 1;
  while (exponent > 0) {
    if (exponent & 1) result = CheckedMul(result, base);
    exponent >>= 1;
    if (exponent > 0) base = CheckedMul(base, base);
  }
  return Value::Int(result);
}

Value Arithmetic(BinaryOp op, const Value& a, const Value& b) {
  bool ints = a.is_integral() && b.is_integral();
  switch (op) {
    case BinaryOp::kAdd:
      if (ints) return Value::Int(CheckedAdd(a.AsInt(), b.AsInt()));
      return Value::Float(a.AsFloat() + b.AsFloat());
    case BinaryOp::kSub:
      if (ints) return Value::Int(CheckedSub(a.AsInt(), b.AsInt()));
      return Value::Float(a.AsFloat() - b.AsFloat());
    case BinaryOp::kMul:
      if (ints) return Value::Int(CheckedMul(a.AsInt(), b.AsInt()));
      return Value::Float(a.AsFloat() * b.AsFloat());
    case BinaryOp::kDiv:
      if (b.AsFloat() == 0) ThrowEval("division by zero");
      return Value::Float(a.AsFloat() / b.AsFloat());
    case BinaryOp::kFloorDiv:
    case BinaryOp::kMod: {
      if (b.AsFloat() == 0) ThrowEval("{} by zero", op == BinaryOp::kMod ? "modulo" : "division");
      if (ints) {
        int64_t x = a.AsInt(), y = b.AsInt();
        if (x == std::numeric_limits<int64_t>::min() && y == -1) {
          if (op == BinaryOp::kMod) return Value::Int(0);
          FailOverflow();
        }
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          --q;
          m += y;
        }
        return Value::Int(op == BinaryOp::kMod ? m : q);
      }
      auto [q, m] = FloatDivMod(a.AsFloat(), b.AsFloat());
      return Value::Float(op == BinaryOp::kMod ? m : q);
    }
    case BinaryOp::kPow: {
      if (ints && b.AsInt() >= 0) return IntPower(a.AsInt(), b.AsInt());
      double x = a.AsFloat(), y = b.AsFloat();
      if (x == 0 && y < 0) ThrowEval("zero cannot be raised to a negative power");
      if (x < 0 && y != std::floor(y)) ThrowEval("a negative number raised to a fractional power is complex");
      return Value::Float(std::pow(x, y));
    }
    default: FailOperands(op, a, b);
  }
}

}  // namespace

void CheckTextSize(size_t bytes) {
  if (bytes > kMaxTextBytes)
    ThrowEvalCode(ErrorCode::kOutOfRange, "a string of {} bytes passes the template limit of {}", bytes, kMaxTextBytes);
}

void CheckListSize(size_t items) {
  if (items > kMaxListItems)
    ThrowEvalCode(ErrorCode::kOutOfRange, "a list of {} items passes the template limit of {}", items, kMaxListItems);
}

Value BinaryOperation(BinaryOp op, const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return Arithmetic(op, a, b);
  if (op == BinaryOp::kAdd && a.is_string() && b.is_string()) {
    CheckTextSize(a.AsString().size() + b.AsString().size());
    return Value::String(a.AsString() + b.AsString());
  }
  if (op == BinaryOp::kAdd && a.is_list() && b.is_list() && a.list().is_tuple == b.list().is_tuple) {
    CheckListSize(a.list().items.size() + b.list().items.size());
    std::vector<Value> items = a.list().items;
    items.insert(items.end(), b.list().items.begin(), b.list().items.end());
    return a.list().is_tuple ? Value::Tuple(std::move(items)) : Value::List(std::move(items));
  }
  if (op == BinaryOp::kMul && IsSequence(a) && b.is_integral()) return Repeat(a, b.AsInt());
  if (op == BinaryOp::kMul && a.is_integral() && IsSequence(b)) return Repeat(b, a.AsInt());
  if (op == BinaryOp::kMod && a.is_string()) return Value::String(PercentFormat(a.AsString(), b));
  FailOperands(op, a, b);
}

Value Negate(const Value& v) {
  if (v.is_integral()) {
    if (v.AsInt() == std::numeric_limits<int64_t>::min()) FailOverflow();
    return Value::Int(-v.AsInt());
  }
  if (v.is_number()) return Value::Float(-v.AsFloat());
  if (v.is_undefined()) ThrowEval("cannot negate an undefined value ({})", v.undefined().hint);
  ThrowEval("bad operand type for unary -: '{}'", TypeName(v));
}

bool CompareValues(CompareOp op, const Value& a, const Value& b) {
  switch (op) {
    case CompareOp::kEq: return Equals(a, b);
    case CompareOp::kNe: return !Equals(a, b);
    case CompareOp::kIn: return Contains(b, a);
    case CompareOp::kNotIn: return !Contains(b, a);
    default: break;
  }
  for (const Value* v : {&a, &b})
    if (v->is_undefined()) ThrowEval("cannot compare an undefined value ({})", v->undefined().hint);
  int c = Compare(a, b);
  switch (op) {
    case CompareOp::kLt: return c < 0;
    case CompareOp::kLe: return c <= 0;
    case CompareOp::kGt: return c > 0;
    default: return c >= 0;
  }
}

bool Contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined: return false;
    case Value::Kind::kString:
      if (!item.is_string()) ThrowEval("'in <string>' requires a string on the left, not '{}'", TypeName(item));
      return container.AsString().find(item.AsString()) != std::string::npos;
    case Value::Kind::kList:
      for (const auto& element : container.list().items)
        if (Equals(element, item)) return true;
      return false;
    case Value::Kind::kDict: return container.dict().Find(item) != nullptr;
    default:
      ThrowEval("'in' needs a string, list or dict on the right, not a '{}'", TypeName(container));
  }
}

namespace {

// Python's PySlice_AdjustIndices for one bound: negative values count from the end, and the result
// is clamped to [0, length] (to [-1, length - 1] for a negative step).
int64_t SliceBound(const Value& v, int64_t fallback, int64_t length, int64_t step) {
  if (v.is_none() || v.is_undefined()) return fallback;
  if (!v.is_integral()) ThrowEval("slice indices must be integers or none, not '{}'", TypeName(v));
  int64_t i = v.AsInt();
  if (i < 0) i = std::max<int64_t>(i + length, step < 0 ? -1 : 0);
  return std::min<int64_t>(i, step < 0 ? length - 1 : length);
}

}  // namespace

Value SliceValue(const Value& object, const Value& start_v, const Value& stop_v, const Value& step_v) {
  int64_t step = 1;
  if (!step_v.is_none() && !step_v.is_undefined()) {
    if (!step_v.is_integral()) ThrowEval("slice step must be an integer, not '{}'", TypeName(step_v));
    step = step_v.AsInt();
    if (step == 0) ThrowEval("slice step cannot be zero");
  }
  auto indexes = [&](int64_t length) {
    int64_t start = SliceBound(start_v, step < 0 ? length - 1 : 0, length, step);
    int64_t stop = SliceBound(stop_v, step < 0 ? -1 : length, length, step);
    std::vector<size_t> out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.push_back(static_cast<size_t>(i));
    return out;
  };
  if (object.is_string()) {
    const std::string& s = object.AsString();
    std::vector<size_t> offsets = CodePointOffsets(s);
    std::string out;
    for (size_t i : indexes(static_cast<int64_t>(offsets.size()) - 1)) out.append(s, offsets[i], offsets[i + 1] - offsets[i]);
    return Value::String(std::move(out));
  }
  if (object.is_list()) {
    const ListObj& list = object.list();
    std::vector<Value> items;
    for (size_t i : indexes(static_cast<int64_t>(list.items.size()))) items.push_back(list.items[i]);
    return list.is_tuple ? Value::Tuple(std::move(items)) : Value::List(std::move(items));
  }
  if (object.is_undefined()) ThrowEval("cannot slice an undefined value ({})", object.undefined().hint);
  ThrowEval("'{}' object cannot be sliced", TypeName(object));
}

std::vector<Value> Iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return {};
    case Value::Kind::kList: return v.list().items;
    case Value::Kind::kDict: {
      std::vector<Value> keys;
      keys.reserve(v.dict().entries.size());
      for (const auto& entry : v.dict().entries) keys.push_back(entry.first);
      return keys;
    }
    case Value::Kind::kString: {
      std::vector<Value> chars;
      for (auto& c : SplitCodePoints(v.AsString())) chars.push_back(Value::String(std::move(c)));
      return chars;
    }
    default: ThrowEval("'{}' object is not iterable", TypeName(v));
  }
}

}  // namespace infernix::jinja
