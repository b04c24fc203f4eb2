// Syntax tree of a parsed template. Built once by the parser and never modified afterwards, so one
// tree can be rendered from many threads at once. Every node records the byte offset of its first
// (or operator) token for error messages.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja/value.h"

namespace infernix::jinja {

enum class ExprKind : uint8_t {
  kLiteral, kName, kList, kDict, kGetAttr, kGetItem, kSlice, kCall, kFilter, kTest, kUnary, kBinary, kCompare,
  kCondition,
};

struct Expr {
  Expr(ExprKind k, uint32_t o) : kind(k), offset(o) {}
  virtual ~Expr() = default;
  ExprKind kind;
  uint32_t offset;
};
using ExprPtr = std::unique_ptr<Expr>;

struct Arguments {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
};

// A constant scalar (None, bool, int, float, str).
struct LiteralExpr : Expr {
  LiteralExpr(uint32_t o, Value v) : Expr(ExprKind::kLiteral, o), value(std::move(v)) {}
  Value value;
};

struct NameExpr : Expr {
  NameExpr(uint32_t o, std::string n) : Expr(ExprKind::kName, o), name(std::move(n)) {}
  std::string name;
};

// [a, b] or (a, b): evaluates to a new list / tuple each time.
struct ListExpr : Expr {
  ListExpr(uint32_t o, bool tuple) : Expr(ExprKind::kList, o), is_tuple(tuple) {}
  std::vector<ExprPtr> items;
  bool is_tuple;
};

struct DictExpr : Expr {
  explicit DictExpr(uint32_t o) : Expr(ExprKind::kDict, o) {}
  std::vector<std::pair<ExprPtr, ExprPtr>> entries;
};

// object.name
struct GetAttrExpr : Expr {
  GetAttrExpr(uint32_t o, ExprPtr obj, std::string n)
      : Expr(ExprKind::kGetAttr, o), object(std::move(obj)), name(std::move(n)) {}
  ExprPtr object;
  std::string name;
};

// object[index]
struct GetItemExpr : Expr {
  GetItemExpr(uint32_t o, ExprPtr obj, ExprPtr i)
      : Expr(ExprKind::kGetItem, o), object(std::move(obj)), index(std::move(i)) {}
  ExprPtr object;
  ExprPtr index;
};

// object[start:stop:step]; absent parts are null.
struct SliceExpr : Expr {
  SliceExpr(uint32_t o, ExprPtr obj) : Expr(ExprKind::kSlice, o), object(std::move(obj)) {}
  ExprPtr object, start, stop, step;
};

struct CallExpr : Expr {
  CallExpr(uint32_t o, ExprPtr c) : Expr(ExprKind::kCall, o), callee(std::move(c)) {}
  ExprPtr callee;
  Arguments args;
};

// operand | name(args). The operand is null for the filters of `{% filter %}` and `{% set x | f %}`
// blocks, which apply to the rendered body.
struct FilterExpr : Expr {
  FilterExpr(uint32_t o, ExprPtr operand_, std::string n)
      : Expr(ExprKind::kFilter, o), operand(std::move(operand_)), name(std::move(n)) {}
  ExprPtr operand;
  std::string name;
  Arguments args;
};

// operand is [not] name(args)
struct TestExpr : Expr {
  TestExpr(uint32_t o, ExprPtr operand_, std::string n, bool neg)
      : Expr(ExprKind::kTest, o), operand(std::move(operand_)), name(std::move(n)), negated(neg) {}
  ExprPtr operand;
  std::string name;
  Arguments args;
  bool negated;
};

enum class UnaryOp : uint8_t { kNot, kNegate, kPlus };

struct UnaryExpr : Expr {
  UnaryExpr(uint32_t o, UnaryOp op_, ExprPtr operand_)
      : Expr(ExprKind::kUnary, o), op(op_), operand(std::move(operand_)) {}
  UnaryOp op;
  ExprPtr operand;
};

enum class BinaryOp : uint8_t { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow, kConcat, kAnd, kOr };

struct BinaryExpr : Expr {
  BinaryExpr(uint32_t o, BinaryOp op_, ExprPtr l, ExprPtr r)
      : Expr(ExprKind::kBinary, o), op(op_), left(std::move(l)), right(std::move(r)) {}
  BinaryOp op;
  ExprPtr left, right;
};

enum class CompareOp : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

// first op1 e1 op2 e2 ...: Python's chained comparison.
struct CompareExpr : Expr {
  CompareExpr(uint32_t o, ExprPtr f) : Expr(ExprKind::kCompare, o), first(std::move(f)) {}
  ExprPtr first;
  std::vector<std::pair<CompareOp, ExprPtr>> rest;
};

// then_value if condition else else_value; else_value may be null (then: undefined).
struct ConditionExpr : Expr {
  ConditionExpr(uint32_t o, ExprPtr c, ExprPtr t, ExprPtr e)
      : Expr(ExprKind::kCondition, o), condition(std::move(c)), then_value(std::move(t)), else_value(std::move(e)) {}
  ExprPtr condition, then_value, else_value;
};

enum class StmtKind : uint8_t {
  kText, kPrint, kIf, kFor, kSet, kSetBlock, kMacro, kCallBlock, kFilterBlock, kWith, kBreak, kContinue, kScope,
};

// Break and Continue are plain Stmts.
struct Stmt {
  Stmt(StmtKind k, uint32_t o) : kind(k), offset(o) {}
  virtual ~Stmt() = default;
  StmtKind kind;
  uint32_t offset;
};
using StmtPtr = std::unique_ptr<Stmt>;
using StmtList = std::vector<StmtPtr>;

struct TextStmt : Stmt {
  TextStmt(uint32_t o, std::string t) : Stmt(StmtKind::kText, o), text(std::move(t)) {}
  std::string text;
};

struct PrintStmt : Stmt {
  PrintStmt(uint32_t o, ExprPtr e) : Stmt(StmtKind::kPrint, o), expr(std::move(e)) {}
  ExprPtr expr;
};

struct IfStmt : Stmt {
  explicit IfStmt(uint32_t o) : Stmt(StmtKind::kIf, o) {}
  std::vector<std::pair<ExprPtr, StmtList>> branches;  // if, elif, ...
  StmtList else_body;
};

struct ForStmt : Stmt {
  explicit ForStmt(uint32_t o) : Stmt(StmtKind::kFor, o) {}
  ExprPtr target;  // a NameExpr or a tuple (ListExpr) of targets
  ExprPtr iterable;
  ExprPtr filter;  // `for x in y if cond`; may be null
  StmtList body, else_body;
};

// {% set target = value %}; target is a name, a tuple of names, or namespace.attribute (GetAttrExpr).
struct SetStmt : Stmt {
  SetStmt(uint32_t o, ExprPtr t, ExprPtr v) : Stmt(StmtKind::kSet, o), target(std::move(t)), value(std::move(v)) {}
  ExprPtr target, value;
};

// {% set target | filters %}body{% endset %}
struct SetBlockStmt : Stmt {
  SetBlockStmt(uint32_t o, ExprPtr t) : Stmt(StmtKind::kSetBlock, o), target(std::move(t)) {}
  ExprPtr target;
  std::vector<std::unique_ptr<FilterExpr>> filters;
  StmtList body;
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // may be null
};

// A macro's signature and body; also the body of a `{% call %}` block (named "caller").
struct MacroDef {
  std::string name;
  uint32_t offset = 0;
  std::vector<MacroParam> params;
  StmtList body;
  // Whether the body refers to these names: extra arguments are errors unless it does.
  bool uses_caller = false, uses_varargs = false, uses_kwargs = false;
};

struct MacroStmt : Stmt {
  explicit MacroStmt(uint32_t o) : Stmt(StmtKind::kMacro, o) {}
  MacroDef def;
};

// {% call(params) macro(args) %}body{% endcall %}
struct CallBlockStmt : Stmt {
  explicit CallBlockStmt(uint32_t o) : Stmt(StmtKind::kCallBlock, o) {}
  ExprPtr call;  // a CallExpr
  MacroDef caller;
};

// {% filter f | g %}body{% endfilter %}
struct FilterBlockStmt : Stmt {
  explicit FilterBlockStmt(uint32_t o) : Stmt(StmtKind::kFilterBlock, o) {}
  std::vector<std::unique_ptr<FilterExpr>> filters;
  StmtList body;
};

// {% with a = 1, b = 2 %}body{% endwith %}
struct WithStmt : Stmt {
  explicit WithStmt(uint32_t o) : Stmt(StmtKind::kWith, o) {}
  std::vector<std::pair<ExprPtr, ExprPtr>> assignments;
  StmtList body;
};

// A body rendered as it is, in the enclosing scope: `{% generation %}` (transformers' extension)
// and `{% autoescape %}` (output is never HTML-escaped here).
struct ScopeStmt : Stmt {
  explicit ScopeStmt(uint32_t o) : Stmt(StmtKind::kScope, o) {}
  StmtList body;
};

}  // namespace infernix::jinja
