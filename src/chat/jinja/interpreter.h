// Tree-walking renderer of a parsed template. One Interpreter renders one template once; it holds
// the output buffer, the macro call depth and nothing shared, so concurrent renders of the same
// tree are independent.
//
// Scoping follows Jinja2: `for` bodies (each iteration afresh), macro bodies, call-block bodies,
// `with` and block-set bodies get their own frame; `if` does not. `{% set %}` writes to the
// innermost frame, so values escape a loop only through a namespace().
//
// Undefined values: a name that is not defined evaluates to Undefined (falsy, iterates as empty,
// `is defined` false), but printing it or concatenating it with `~` is an error, as is reading an
// attribute of any Undefined or calling it. A missing attribute or key of a defined value prints as
// "" (as in transformers' default Jinja environment).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/jinja/ast.h"
#include "chat/jinja/eval_error.h"
#include "chat/jinja/value.h"

namespace infernix::jinja {

// Macros may nest (or recurse) this deep.
inline constexpr int kMaxCallDepth = 64;
// The work one render may take, so that a template that loops without end ends in an error instead of
// a stuck request: statements, loop iterations and expressions evaluated (see also kMaxTextBytes).
// Qwen3's template takes 1.6 million for 32,000 messages; a loop without end stops after ~1.6 s.
inline constexpr int64_t kMaxRenderSteps = 10'000'000;

// A scope: variables in assignment order, and the enclosing scope.
struct Frame {
  explicit Frame(std::shared_ptr<Frame> p = nullptr) : parent(std::move(p)) {}
  // The innermost binding of `name` in this frame or an enclosing one; nullptr if none.
  const Value* Find(std::string_view name) const;
  // Binds `name` in this frame.
  void Set(std::string_view name, Value value);

  std::shared_ptr<Frame> parent;
  std::vector<std::pair<std::string, Value>> vars;
};
using FramePtr = std::shared_ptr<Frame>;

class Interpreter {
 public:
  Interpreter(const SourceMap& map, std::string& out) : map_(map), out_(&out) {}

  // Renders `body` into the output with `frame` as the top-level scope.
  void Run(const StmtList& body, const FramePtr& frame);

  // Operations filters, tests and functions build on. They throw EvalError (without position).
  Value Call(const Value& callee, CallArgs& args);
  Value ApplyFilter(std::string_view name, Value input, CallArgs& args);
  bool ApplyTest(std::string_view name, const Value& input, CallArgs& args);
  Value GetAttr(const Value& object, std::string_view name);
  Value GetItem(const Value& object, const Value& key);

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  class OutputCapture;

  [[noreturn]] void Fail(uint32_t offset, std::string_view message) const;
  // Runs fn(); an EvalError it throws is rethrown as infernix::Error positioned at `offset`.
  template <typename Fn>
  auto AtOffset(uint32_t offset, Fn&& fn) -> decltype(fn());

  // --- statements (interpreter.cpp)
  Flow Exec(const StmtList& body, const FramePtr& frame);
  Flow ExecStatement(const Stmt& stmt, const FramePtr& frame);
  Flow ExecIf(const IfStmt& stmt, const FramePtr& frame);
  void ExecFor(const ForStmt& stmt, const FramePtr& frame);
  void ExecCallBlock(const CallBlockStmt& stmt, const FramePtr& frame);
  void Print(uint32_t offset, const Value& value);
  std::string Capture(const StmtList& body, const FramePtr& frame);
  Value ApplyFilterChain(const std::vector<std::unique_ptr<FilterExpr>>& filters, Value input, const FramePtr& frame);
  void Assign(const Expr& target, Value value, const FramePtr& frame);
  Value MakeMacro(const MacroDef& def, const FramePtr& closure);
  Value CallMacro(const MacroDef& def, const FramePtr& closure, CallArgs& args);

  // --- expressions (interpreter_expr.cpp)
  Value Eval(const Expr& expr, const FramePtr& frame);
  Value EvalUnchecked(const Expr& expr, const FramePtr& frame);
  Value EvalCall(const CallExpr& call, const FramePtr& frame, const Value* caller);
  Value EvalBinary(const BinaryExpr& expr, const FramePtr& frame);
  bool EvalCompare(const CompareExpr& expr, const FramePtr& frame);
  CallArgs EvalArgs(const Arguments& args, const FramePtr& frame);
  Value LoopAttribute(const Value& loop, std::string_view name);

  // One more statement, iteration or expression (kMaxRenderSteps).
  void Step();
  // Appends text to the output (the render's, or a captured block's), held to kMaxTextBytes.
  void Emit(std::string_view text);

  const SourceMap& map_;
  std::string* out_;
  int64_t steps_ = 0;
  int call_depth_ = 0;
  std::vector<FramePtr> closures_;  // frames that define macros (see MakeMacro)
};

template <typename Fn>
auto Interpreter::AtOffset(uint32_t offset, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const EvalError& e) {
    map_.Throw(e.code(), offset, e.what());
  }
}

// The text a value prints as: Python str(), except that an undefined variable (UndefinedKind::
// kVariable) is an error rather than "". Used for {{ }}, `~` and string filters.
std::string ToText(const Value& value);

}  // namespace infernix::jinja
