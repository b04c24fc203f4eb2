// Expressions: evaluation, attribute and item access, calls.
#include "chat/jinja/builtins.h"
#include "chat/jinja/interpreter.h"
#include "chat/jinja/operators.h"
#include "chat/jinja/utf8.h"

namespace infernix::jinja {

Value Interpreter::Eval(const Expr& expr, const FramePtr& frame) {
  return AtOffset(expr.offset, [&] {
    Step();
    return EvalUnchecked(expr, frame);
  });
}

Value Interpreter::EvalUnchecked(const Expr& expr, const FramePtr& frame) {
  switch (expr.kind) {
    case ExprKind::kLiteral: return static_cast<const LiteralExpr&>(expr).value;
    case ExprKind::kName: {
      const std::string& name = static_cast<const NameExpr&>(expr).name;
      if (const Value* v = frame->Find(name)) return *v;
      return Value::Undefined(fmt::format("'{}' is undefined", name), UndefinedKind::kVariable);
    }
    case ExprKind::kList: {
      const auto& list = static_cast<const ListExpr&>(expr);
      std::vector<Value> items;
      items.reserve(list.items.size());
      for (const auto& item : list.items) items.push_back(Eval(*item, frame));
      return list.is_tuple ? Value::Tuple(std::move(items)) : Value::List(std::move(items));
    }
    case ExprKind::kDict: {
      Value dict = Value::Dict();
      for (const auto& [key, value] : static_cast<const DictExpr&>(expr).entries) {
        Value k = Eval(*key, frame);
        dict.dict().Set(std::move(k), Eval(*value, frame));
      }
      return dict;
    }
    case ExprKind::kGetAttr: {
      const auto& attr = static_cast<const GetAttrExpr&>(expr);
      return GetAttr(Eval(*attr.object, frame), attr.name);
    }
    case ExprKind::kGetItem: {
      const auto& item = static_cast<const GetItemExpr&>(expr);
      Value object = Eval(*item.object, frame);
      return GetItem(object, Eval(*item.index, frame));
    }
    case ExprKind::kSlice: {
      const auto& slice = static_cast<const SliceExpr&>(expr);
      Value object = Eval(*slice.object, frame);
      auto part = [&](const ExprPtr& e) { return e ? Eval(*e, frame) : Value::None(); };
      Value start = part(slice.start), stop = part(slice.stop), step = part(slice.step);
      return SliceValue(object, start, stop, step);
    }
    case ExprKind::kCall: return EvalCall(static_cast<const CallExpr&>(expr), frame, nullptr);
    case ExprKind::kFilter: {
      const auto& filter = static_cast<const FilterExpr&>(expr);
      Value input = Eval(*filter.operand, frame);
      CallArgs args = EvalArgs(filter.args, frame);
      return ApplyFilter(filter.name, std::move(input), args);
    }
    case ExprKind::kTest: {
      const auto& test = static_cast<const TestExpr&>(expr);
      Value input = Eval(*test.operand, frame);
      CallArgs args = EvalArgs(test.args, frame);
      return Value::Bool(ApplyTest(test.name, input, args) != test.negated);
    }
    case ExprKind::kUnary: {
      const auto& unary = static_cast<const UnaryExpr&>(expr);
      Value v = Eval(*unary.operand, frame);
      if (unary.op == UnaryOp::kNot) return Value::Bool(!Truthy(v));
      if (unary.op == UnaryOp::kNegate) return Negate(v);
      if (!v.is_number()) ThrowEval("bad operand type for unary +: '{}'", TypeName(v));
      return v;
    }
    case ExprKind::kBinary: return EvalBinary(static_cast<const BinaryExpr&>(expr), frame);
    case ExprKind::kCompare: return Value::Bool(EvalCompare(static_cast<const CompareExpr&>(expr), frame));
    case ExprKind::kCondition: {
      const auto& cond = static_cast<const ConditionExpr&>(expr);
      if (Truthy(Eval(*cond.condition, frame))) return Eval(*cond.then_value, frame);
      if (cond.else_value) return Eval(*cond.else_value, frame);
      return Value::Undefined("the condition of an 'if' expression without 'else' was false");
    }
  }
  return Value();
}

Value Interpreter::EvalBinary(const BinaryExpr& expr, const FramePtr& frame) {
  Value left = Eval(*expr.left, frame);
  switch (expr.op) {
    case BinaryOp::kAnd: return Truthy(left) ? Eval(*expr.right, frame) : left;
    case BinaryOp::kOr: return Truthy(left) ? left : Eval(*expr.right, frame);
    case BinaryOp::kConcat: {
      Value right = Eval(*expr.right, frame);
      std::string a = ToText(left), b = ToText(right);
      CheckTextSize(a.size() + b.size());
      return Value::String(std::move(a) + b);
    }
    default: {
      Value right = Eval(*expr.right, frame);
      return BinaryOperation(expr.op, left, right);
    }
  }
}

bool Interpreter::EvalCompare(const CompareExpr& expr, const FramePtr& frame) {
  Value left = Eval(*expr.first, frame);
  for (const auto& [op, operand] : expr.rest) {
    Value right = Eval(*operand, frame);
    if (!AtOffset(operand->offset, [&, op = op] { return CompareValues(op, left, right); })) return false;
    left = std::move(right);
  }
  return true;
}

CallArgs Interpreter::EvalArgs(const Arguments& args, const FramePtr& frame) {
  CallArgs out;
  out.positional.reserve(args.positional.size());
  for (const auto& arg : args.positional) out.positional.push_back(Eval(*arg, frame));
  for (const auto& [name, arg] : args.keyword) {
    for (const auto& [seen, value] : out.keyword)
      if (seen == name) Fail(arg->offset, fmt::format("keyword argument '{}' repeated", name));
    out.keyword.emplace_back(name, Eval(*arg, frame));
  }
  return out;
}

Value Interpreter::EvalCall(const CallExpr& call, const FramePtr& frame, const Value* caller) {
  Value callee;
  if (call.callee->kind == ExprKind::kGetAttr) {
    // obj.method(...): str / list / dict methods are called directly, without a bound-method object.
    const auto& attr = static_cast<const GetAttrExpr&>(*call.callee);
    Value object = Eval(*attr.object, frame);
    if (HasMethod(object, attr.name)) {
      CallArgs args = EvalArgs(call.args, frame);
      if (caller != nullptr) args.keyword.emplace_back("caller", *caller);
      return CallMethod(object, attr.name, args);
    }
    callee = AtOffset(attr.offset, [&] { return GetAttr(object, attr.name); });
  } else {
    callee = Eval(*call.callee, frame);
  }
  if (callee.kind() != Value::Kind::kCallable && !callee.is_undefined() && call.callee->kind == ExprKind::kName)
    ThrowEval("'{}' is a '{}', not a function: it cannot be called", static_cast<const NameExpr&>(*call.callee).name,
              TypeName(callee));
  CallArgs args = EvalArgs(call.args, frame);
  if (caller != nullptr) args.keyword.emplace_back("caller", *caller);
  return Call(callee, args);
}

Value Interpreter::Call(const Value& callee, CallArgs& args) {
  if (callee.kind() == Value::Kind::kCallable) return callee.callable().fn(*this, args);
  if (callee.is_undefined()) ThrowEval("{}: an undefined value cannot be called", callee.undefined().hint);
  ThrowEval("'{}' object is not callable", TypeName(callee));
}

Value Interpreter::ApplyFilter(std::string_view name, Value input, CallArgs& args) {
  FilterFunction filter = FindFilter(name);
  if (filter == nullptr) ThrowEvalCode(ErrorCode::kUnsupported, "unknown filter '{}'", name);
  return filter(*this, input, args);
}

bool Interpreter::ApplyTest(std::string_view name, const Value& input, CallArgs& args) {
  TestFunction test = FindTest(name);
  if (test == nullptr) ThrowEvalCode(ErrorCode::kUnsupported, "unknown test '{}'", name);
  return test(*this, input, args);
}

namespace {

Value MissingMember(const Value& object, std::string_view what) {
  return Value::Undefined(fmt::format("'{}' object has no {}", TypeName(object), what), UndefinedKind::kMember);
}

Value BoundMethod(const Value& self, std::string_view name) {
  return Value::Function(std::string(name), [self, name = std::string(name)](Interpreter&, CallArgs& args) {
    return CallMethod(self, name, args);
  });
}

}  // namespace

// Jinja's getattr: a method of the value's Python type wins over a dict key of the same name.
Value Interpreter::GetAttr(const Value& object, std::string_view name) {
  switch (object.kind()) {
    case Value::Kind::kUndefined:
      ThrowEval("cannot read attribute '{}' of an undefined value ({})", name, object.undefined().hint);
    case Value::Kind::kDict:
      if (HasMethod(object, name)) return BoundMethod(object, name);
      if (const Value* v = object.dict().Find(name)) return *v;
      return MissingMember(object, fmt::format("attribute or key '{}'", name));
    case Value::Kind::kNamespace:
      if (const Value* v = object.ns().attrs.Find(name)) return *v;
      return MissingMember(object, fmt::format("attribute '{}'", name));
    case Value::Kind::kLoop: return LoopAttribute(object, name);
    default:
      if (HasMethod(object, name)) return BoundMethod(object, name);
      return MissingMember(object, fmt::format("attribute '{}'", name));
  }
}

// Jinja's getitem: a key or index first, then an attribute of that name.
Value Interpreter::GetItem(const Value& object, const Value& key) {
  if (object.is_undefined()) ThrowEval("cannot index an undefined value ({})", object.undefined().hint);
  if (object.is_dict()) {
    if (const Value* v = object.dict().Find(key)) return *v;
    if (key.is_string() && HasMethod(object, key.AsString())) return BoundMethod(object, key.AsString());
    return MissingMember(object, fmt::format("key {}", Repr(key)));
  }
  if ((object.is_list() || object.is_string()) && key.is_integral()) {
    int64_t index = key.AsInt();
    if (object.is_list()) {
      const auto& items = object.list().items;
      if (index < 0) index += static_cast<int64_t>(items.size());
      if (index >= 0 && index < static_cast<int64_t>(items.size())) return items[static_cast<size_t>(index)];
    } else {
      std::vector<size_t> offsets = CodePointOffsets(object.AsString());
      int64_t length = static_cast<int64_t>(offsets.size()) - 1;
      if (index < 0) index += length;
      if (index >= 0 && index < length) {
        size_t i = static_cast<size_t>(index);
        return Value::String(object.AsString().substr(offsets[i], offsets[i + 1] - offsets[i]));
      }
    }
    return MissingMember(object, fmt::format("index {}", key.AsInt()));
  }
  if (key.is_string()) return GetAttr(object, key.AsString());
  return MissingMember(object, fmt::format("item {}", Repr(key)));
}

Value Interpreter::LoopAttribute(const Value& loop_value, std::string_view name) {
  const LoopObj& loop = loop_value.loop();
  int64_t index = static_cast<int64_t>(loop.index), length = static_cast<int64_t>(loop.items->size());
  if (name == "index") return Value::Int(index + 1);
  if (name == "index0") return Value::Int(index);
  if (name == "revindex") return Value::Int(length - index);
  if (name == "revindex0") return Value::Int(length - index - 1);
  if (name == "first") return Value::Bool(index == 0);
  if (name == "last") return Value::Bool(index == length - 1);
  if (name == "length") return Value::Int(length);
  if (name == "depth") return Value::Int(1);
  if (name == "depth0") return Value::Int(0);
  if (name == "previtem")
    return index > 0 ? (*loop.items)[loop.index - 1] : Value::Undefined("there is no previous item");
  if (name == "nextitem")
    return index + 1 < length ? (*loop.items)[loop.index + 1] : Value::Undefined("there is no next item");
  if (name == "cycle") {
    return Value::Function("loop.cycle", [index](Interpreter&, CallArgs& args) {
      if (args.positional.empty()) ThrowEval("loop.cycle() needs at least one value");
      return args.positional[static_cast<size_t>(index) % args.positional.size()];
    });
  }
  return MissingMember(loop_value, fmt::format("attribute '{}'", name));
}

}  // namespace infernix::jinja
