// Statements, scopes and macros.
#include "chat/jinja/interpreter.h"

#include "base/check.h"
#include "chat/jinja/builtins.h"
#include "chat/jinja/operators.h"

namespace infernix::jinja {

const Value* Frame::Find(std::string_view name) const {
  for (const Frame* f = this; f != nullptr; f = f->parent.get())
    for (const auto& [key, value] : f->vars)
      if (key == name) return &value;
  return nullptr;
}

void Frame::Set(std::string_view name, Value value) {
  for (auto& [key, existing] : vars) {
    if (key == name) {
      existing = std::move(value);
      return;
    }
  }
  vars.emplace_back(std::string(name), std::move(value));
}

std::string ToText(const Value& value) {
  if (value.is_undefined() && value.undefined().kind == UndefinedKind::kVariable)
    ThrowEval("{} (an undefined variable cannot be printed; test it with 'is defined' or give a '| default')",
              value.undefined().hint);
  return Str(value);
}

// Redirects the interpreter's output into a buffer for its lifetime.
class Interpreter::OutputCapture {
 public:
  explicit OutputCapture(Interpreter& in)
      : in_(in), buffer_(std::make_unique<std::string>()), saved_(std::exchange(in.out_, buffer_.get())) {}
  ~OutputCapture() { in_.out_ = saved_; }
  std::string Take() { return std::move(*buffer_); }

 private:
  Interpreter& in_;
  std::unique_ptr<std::string> buffer_;
  std::string* saved_;
};

void Interpreter::Fail(uint32_t offset, std::string_view message) const {
  map_.Throw(ErrorCode::kInvalidArgument, offset, message);
}

void Interpreter::Run(const StmtList& body, const FramePtr& frame) { Exec(body, frame); }

void Interpreter::Step() {
  if (++steps_ > kMaxRenderSteps)
    ThrowEvalCode(ErrorCode::kOutOfRange,
                  "the template ran more than {} statements, loop iterations and expressions (a loop without end?)",
                  kMaxRenderSteps);
}

void Interpreter::Emit(std::string_view text) {
  *out_ += text;
  if (out_->size() > kMaxTextBytes)
    ThrowEvalCode(ErrorCode::kOutOfRange, "the template's output passed {} bytes", kMaxTextBytes);
}

Interpreter::Flow Interpreter::Exec(const StmtList& body, const FramePtr& frame) {
  for (const auto& stmt : body) {
    Flow flow = ExecStatement(*stmt, frame);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

void Interpreter::Print(uint32_t offset, const Value& value) {
  AtOffset(offset, [&] { Emit(ToText(value)); });
}

Interpreter::Flow Interpreter::ExecStatement(const Stmt& stmt, const FramePtr& frame) {
  AtOffset(stmt.offset, [&] { Step(); });
  switch (stmt.kind) {
    case StmtKind::kText:
      AtOffset(stmt.offset, [&] { Emit(static_cast<const TextStmt&>(stmt).text); });
      break;
    case StmtKind::kPrint: {
      const Expr& expr = *static_cast<const PrintStmt&>(stmt).expr;
      Print(expr.offset, Eval(expr, frame));
      break;
    }
    case StmtKind::kIf: return ExecIf(static_cast<const IfStmt&>(stmt), frame);
    case StmtKind::kFor: ExecFor(static_cast<const ForStmt&>(stmt), frame); break;
    case StmtKind::kSet: {
      const auto& set = static_cast<const SetStmt&>(stmt);
      Assign(*set.target, Eval(*set.value, frame), frame);
      break;
    }
    case StmtKind::kSetBlock: {
      const auto& set = static_cast<const SetBlockStmt&>(stmt);
      Value text = Value::String(Capture(set.body, std::make_shared<Frame>(frame)));
      Assign(*set.target, ApplyFilterChain(set.filters, std::move(text), frame), frame);
      break;
    }
    case StmtKind::kMacro: {
      const MacroDef& def = static_cast<const MacroStmt&>(stmt).def;
      frame->Set(def.name, MakeMacro(def, frame));
      break;
    }
    case StmtKind::kCallBlock: ExecCallBlock(static_cast<const CallBlockStmt&>(stmt), frame); break;
    case StmtKind::kFilterBlock: {
      const auto& block = static_cast<const FilterBlockStmt&>(stmt);
      Value text = Value::String(Capture(block.body, std::make_shared<Frame>(frame)));
      Print(stmt.offset, ApplyFilterChain(block.filters, std::move(text), frame));
      break;
    }
    case StmtKind::kWith: {
      const auto& with = static_cast<const WithStmt&>(stmt);
      auto inner = std::make_shared<Frame>(frame);
      for (const auto& [target, value] : with.assignments) Assign(*target, Eval(*value, inner), inner);
      return Exec(with.body, inner);
    }
    case StmtKind::kBreak: return Flow::kBreak;
    case StmtKind::kContinue: return Flow::kContinue;
    case StmtKind::kScope: return Exec(static_cast<const ScopeStmt&>(stmt).body, frame);
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::ExecIf(const IfStmt& stmt, const FramePtr& frame) {
  for (const auto& [condition, body] : stmt.branches)
    if (Truthy(Eval(*condition, frame))) return Exec(body, frame);
  return Exec(stmt.else_body, frame);
}

void Interpreter::ExecFor(const ForStmt& stmt, const FramePtr& frame) {
  Value iterable = Eval(*stmt.iterable, frame);
  std::vector<Value> items = AtOffset(stmt.iterable->offset, [&] { return Iterate(iterable); });
  if (stmt.filter) {
    std::vector<Value> kept;
    for (auto& item : items) {
      auto scope = std::make_shared<Frame>(frame);
      Assign(*stmt.target, item, scope);
      if (Truthy(Eval(*stmt.filter, scope))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  auto shared_items = std::make_shared<std::vector<Value>>(std::move(items));
  for (size_t i = 0; i < shared_items->size(); ++i) {
    AtOffset(stmt.offset, [&] { Step(); });
    auto scope = std::make_shared<Frame>(frame);  // each iteration starts from a fresh scope
    Assign(*stmt.target, (*shared_items)[i], scope);
    scope->Set("loop", Value::Loop(shared_items, i));
    if (Exec(stmt.body, scope) == Flow::kBreak) break;
  }
  if (shared_items->empty() && !stmt.else_body.empty()) Exec(stmt.else_body, std::make_shared<Frame>(frame));
}

std::string Interpreter::Capture(const StmtList& body, const FramePtr& frame) {
  OutputCapture capture(*this);
  Exec(body, frame);
  return capture.Take();
}

Value Interpreter::ApplyFilterChain(const std::vector<std::unique_ptr<FilterExpr>>& filters, Value input,
                                    const FramePtr& frame) {
  for (const auto& filter : filters) {
    CallArgs args = EvalArgs(filter->args, frame);
    input = AtOffset(filter->offset, [&] { return ApplyFilter(filter->name, std::move(input), args); });
  }
  return input;
}

void Interpreter::Assign(const Expr& target, Value value, const FramePtr& frame) {
  if (target.kind == ExprKind::kName) {
    frame->Set(static_cast<const NameExpr&>(target).name, std::move(value));
    return;
  }
  if (target.kind == ExprKind::kGetAttr) {  // {% set ns.attr = value %}
    const auto& attr = static_cast<const GetAttrExpr&>(target);
    const auto& name = static_cast<const NameExpr&>(*attr.object).name;
    const Value* ns = frame->Find(name);
    if (ns == nullptr || ns->kind() != Value::Kind::kNamespace)
      Fail(target.offset, fmt::format("cannot assign attribute '{}': '{}' is {}, not a namespace()", attr.name, name,
                                      ns == nullptr ? "undefined" : fmt::format("a '{}'", TypeName(*ns))));
    if (AtOffset(target.offset, [&] { return ContainsContainer(value, ns->container()); }))
      Fail(target.offset, fmt::format("cannot assign '{}.{}': the value contains the namespace itself", name, attr.name));
    ns->ns().attrs.Set(Value::String(attr.name), std::move(value));
    return;
  }
  const auto& names = static_cast<const ListExpr&>(target).items;  // a tuple of targets
  std::vector<Value> items = AtOffset(target.offset, [&] {
    if (value.is_undefined()) ThrowEval("cannot unpack an undefined value ({})", value.undefined().hint);
    return Iterate(value);
  });
  if (items.size() != names.size())
    Fail(target.offset, fmt::format("cannot unpack {} value(s) into {} names", items.size(), names.size()));
  for (size_t i = 0; i < names.size(); ++i) Assign(*names[i], std::move(items[i]), frame);
}

// The macro refers to its defining frame weakly (the frame holds the macro: a strong reference
// would be a cycle); closures_ keeps the frame alive until the render ends.
Value Interpreter::MakeMacro(const MacroDef& def, const FramePtr& closure) {
  if (closures_.empty() || closures_.back() != closure) closures_.push_back(closure);
  return Value::Function(def.name, [def = &def, weak = std::weak_ptr<Frame>(closure)](Interpreter& in, CallArgs& args) {
    FramePtr frame = weak.lock();
    INFX_CHECK(frame != nullptr);
    return in.CallMacro(*def, frame, args);
  });
}

Value Interpreter::CallMacro(const MacroDef& def, const FramePtr& closure, CallArgs& args) {
  if (call_depth_ >= kMaxCallDepth)
    ThrowEvalCode(ErrorCode::kOutOfRange, "macro '{}': calls nested deeper than {} levels (runaway recursion?)",
                  def.name, kMaxCallDepth);
  struct DepthGuard {
    int& depth;
    ~DepthGuard() { --depth; }
  } guard{++call_depth_};

  auto frame = std::make_shared<Frame>(closure);
  size_t n_params = def.params.size();
  std::vector<bool> given(n_params, false);
  for (size_t i = 0; i < std::min(n_params, args.positional.size()); ++i) {
    frame->Set(def.params[i].name, std::move(args.positional[i]));
    given[i] = true;
  }
  std::vector<Value> varargs;
  for (size_t i = n_params; i < args.positional.size(); ++i) varargs.push_back(std::move(args.positional[i]));
  if (!varargs.empty() && !def.uses_varargs)
    ThrowEval("macro '{}' takes at most {} argument(s), {} given", def.name, n_params, args.positional.size());
  Value kwargs = Value::Dict();
  Value caller = Value::Undefined("no caller defined: the macro was not invoked from a {% call %} block");
  for (auto& [name, value] : args.keyword) {
    auto param = std::find_if(def.params.begin(), def.params.end(),
                              [&name = name](const MacroParam& p) { return p.name == name; });
    if (param != def.params.end()) {
      size_t index = static_cast<size_t>(param - def.params.begin());
      if (given[index]) ThrowEval("macro '{}' got multiple values for argument '{}'", def.name, name);
      frame->Set(name, std::move(value));
      given[index] = true;
    } else if (name == "caller" && def.uses_caller) {
      caller = std::move(value);
    } else if (def.uses_kwargs) {
      kwargs.dict().Set(Value::String(name), std::move(value));
    } else {
      ThrowEval("macro '{}' takes no keyword argument '{}'", def.name, name);
    }
  }
  for (size_t i = 0; i < n_params; ++i) {  // defaults may refer to earlier parameters
    if (given[i]) continue;
    const MacroParam& param = def.params[i];
    frame->Set(param.name, param.default_value
                               ? Eval(*param.default_value, frame)
                               : Value::Undefined(fmt::format("macro '{}': parameter '{}' was not given", def.name,
                                                              param.name),
                                                  UndefinedKind::kVariable));
  }
  if (def.uses_varargs) frame->Set("varargs", Value::Tuple(std::move(varargs)));
  if (def.uses_kwargs) frame->Set("kwargs", std::move(kwargs));
  if (def.uses_caller) frame->Set("caller", std::move(caller));
  return Value::String(Capture(def.body, frame));
}

void Interpreter::ExecCallBlock(const CallBlockStmt& stmt, const FramePtr& frame) {
  Value caller = MakeMacro(stmt.caller, frame);
  const auto& call = static_cast<const CallExpr&>(*stmt.call);
  Print(stmt.offset, AtOffset(call.offset, [&] { return EvalCall(call, frame, &caller); }));
}

}  // namespace infernix::jinja
