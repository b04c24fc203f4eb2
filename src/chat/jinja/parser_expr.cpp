// Expressions, with Jinja2's precedence (lowest first): `a if c else b`, or, and, not, comparisons
// and `in`, + -, ~, * / // %, **, unary - +, then postfix (.attr, [index], (call)) and
// filters / tests (`| f`, `is t`).
#include "chat/jinja/builtins.h"
#include "chat/jinja/parser.h"

namespace infernix::jinja {

void Parser::CheckFilterExists(const FilterExpr& filter) const {
  if (FindFilter(filter.name) == nullptr)
    map_.Throw(ErrorCode::kUnsupported, filter.offset, fmt::format("unknown filter '{}'", filter.name));
}

void Parser::NoteName(std::string_view name) {
  for (MacroDef* def : macros_) {
    if (name == "caller") def->uses_caller = true;
    if (name == "varargs") def->uses_varargs = true;
    if (name == "kwargs") def->uses_kwargs = true;
  }
}

bool Parser::IsTupleEnd(const std::vector<std::string_view>& extra_ends) const {
  const Token& t = Current();
  if (t.kind == TokenKind::kVariableEnd || t.kind == TokenKind::kBlockEnd || IsOperator(t, ")")) return true;
  return t.kind == TokenKind::kName && std::find(extra_ends.begin(), extra_ends.end(), t.text) != extra_ends.end();
}

ExprPtr Parser::ParseTuple(bool with_condition, std::vector<std::string_view> extra_ends, bool in_parens) {
  uint32_t offset = Current().offset;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) ExpectOperator(",");
    if (IsTupleEnd(extra_ends)) break;
    items.push_back(ParseExpression(with_condition));
    if (!IsOperator(",")) break;
    is_tuple = true;
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!in_parens) FailUnexpected("an expression");
  }
  auto tuple = std::make_unique<ListExpr>(offset, true);
  tuple->items = std::move(items);
  return tuple;
}

ExprPtr Parser::ParseAssignTarget(bool with_tuple, bool with_namespace, std::vector<std::string_view> extra_ends) {
  auto parse_one = [&]() -> ExprPtr {
    if (SkipOperator("(")) {
      ExprPtr inner = ParseAssignTarget(true, with_namespace);
      ExpectOperator(")");
      return inner;
    }
    const Token& name = Current();
    if (name.kind != TokenKind::kName) FailUnexpected("a variable name to assign");
    static constexpr std::string_view kConstants[] = {"true", "false", "none", "True", "False", "None"};
    if (std::find(std::begin(kConstants), std::end(kConstants), name.text) != std::end(kConstants))
      Fail(name.offset, fmt::format("cannot assign to '{}'", name.text));
    Advance();
    auto target = std::make_unique<NameExpr>(name.offset, name.text);
    if (!with_namespace || !IsOperator(".")) return target;
    uint32_t dot = Advance().offset;
    return std::make_unique<GetAttrExpr>(dot, std::move(target), ExpectName().text);
  };
  if (!with_tuple) return parse_one();
  uint32_t offset = Current().offset;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) ExpectOperator(",");
    if (IsTupleEnd(extra_ends) || IsOperator("=")) break;
    items.push_back(parse_one());
    if (!IsOperator(",")) break;
    is_tuple = true;
  }
  if (items.empty()) FailUnexpected("a variable name to assign");
  if (!is_tuple) return std::move(items[0]);
  auto tuple = std::make_unique<ListExpr>(offset, true);
  tuple->items = std::move(items);
  return tuple;
}

ExprPtr Parser::ParseExpression(bool with_condition) {
  DepthGuard guard(*this);
  ExprPtr expr = ParseOr();
  while (with_condition && IsName("if")) {
    uint32_t offset = Advance().offset;
    ExprPtr condition = ParseOr();
    ExprPtr otherwise = SkipName("else") ? ParseExpression(true) : nullptr;
    expr = std::make_unique<ConditionExpr>(offset, std::move(condition), std::move(expr), std::move(otherwise));
  }
  return expr;
}

namespace {

constexpr std::pair<std::string_view, BinaryOp> kOr[] = {{"or", BinaryOp::kOr}};
constexpr std::pair<std::string_view, BinaryOp> kAnd[] = {{"and", BinaryOp::kAnd}};
constexpr std::pair<std::string_view, BinaryOp> kAdditive[] = {{"+", BinaryOp::kAdd}, {"-", BinaryOp::kSub}};
constexpr std::pair<std::string_view, BinaryOp> kConcat[] = {{"~", BinaryOp::kConcat}};
constexpr std::pair<std::string_view, BinaryOp> kMultiplicative[] = {
    {"*", BinaryOp::kMul}, {"/", BinaryOp::kDiv}, {"//", BinaryOp::kFloorDiv}, {"%", BinaryOp::kMod}};
constexpr std::pair<std::string_view, BinaryOp> kPower[] = {{"**", BinaryOp::kPow}};

}  // namespace

ExprPtr Parser::ParseBinary(std::span<const std::pair<std::string_view, BinaryOp>> ops, ExprPtr (Parser::*operand)()) {
  ExprPtr left = (this->*operand)();
  while (true) {
    const Token& t = Current();
    bool may_match = t.kind == TokenKind::kOperator || t.kind == TokenKind::kName;
    auto op = std::find_if(ops.begin(), ops.end(), [&](const auto& o) { return may_match && t.text == o.first; });
    if (op == ops.end()) return left;
    Advance();
    left = std::make_unique<BinaryExpr>(t.offset, op->second, std::move(left), (this->*operand)());
  }
}

ExprPtr Parser::ParseOr() { return ParseBinary(kOr, &Parser::ParseAnd); }
ExprPtr Parser::ParseAnd() { return ParseBinary(kAnd, &Parser::ParseNot); }

ExprPtr Parser::ParseNot() {
  if (!IsName("not")) return ParseCompare();
  DepthGuard guard(*this);
  uint32_t offset = Advance().offset;
  return std::make_unique<UnaryExpr>(offset, UnaryOp::kNot, ParseNot());
}

ExprPtr Parser::ParseCompare() {
  uint32_t offset = Current().offset;
  ExprPtr first = ParseAdditive();
  std::vector<std::pair<CompareOp, ExprPtr>> rest;
  static constexpr std::pair<std::string_view, CompareOp> kOps[] = {
      {"==", CompareOp::kEq}, {"!=", CompareOp::kNe}, {"<", CompareOp::kLt},
      {"<=", CompareOp::kLe}, {">", CompareOp::kGt},  {">=", CompareOp::kGe}};
  while (true) {
    auto op = std::find_if(std::begin(kOps), std::end(kOps), [&](auto& o) { return IsOperator(o.first); });
    if (op != std::end(kOps)) {
      Advance();
      rest.emplace_back(op->second, ParseAdditive());
    } else if (SkipName("in")) {
      rest.emplace_back(CompareOp::kIn, ParseAdditive());
    } else if (IsName("not") && Peek().kind == TokenKind::kName && Peek().text == "in") {
      Advance();
      Advance();
      rest.emplace_back(CompareOp::kNotIn, ParseAdditive());
    } else {
      break;
    }
  }
  if (rest.empty()) return first;
  auto compare = std::make_unique<CompareExpr>(offset, std::move(first));
  compare->rest = std::move(rest);
  return compare;
}

ExprPtr Parser::ParseAdditive() { return ParseBinary(kAdditive, &Parser::ParseConcat); }
ExprPtr Parser::ParseConcat() { return ParseBinary(kConcat, &Parser::ParseMultiplicative); }
ExprPtr Parser::ParseMultiplicative() { return ParseBinary(kMultiplicative, &Parser::ParsePower); }

// Jinja's ** is left-associative: 2 ** 3 ** 2 == 64.
ExprPtr Parser::ParsePower() { return ParseBinary(kPower, &Parser::ParseUnaryWithFilters); }
ExprPtr Parser::ParseUnaryWithFilters() { return ParseUnary(true); }

// A unary minus binds tighter than filters: -x | abs is abs(-x).
ExprPtr Parser::ParseUnary(bool with_filter) {
  DepthGuard guard(*this);
  ExprPtr node;
  if (IsOperator("-") || IsOperator("+")) {
    const Token& op = Advance();
    node = std::make_unique<UnaryExpr>(op.offset, op.text == "-" ? UnaryOp::kNegate : UnaryOp::kPlus, ParseUnary(false));
  } else {
    node = ParsePrimary();
  }
  node = ParsePostfix(std::move(node));
  return with_filter ? ParseFilterAndTests(std::move(node)) : std::move(node);
}

ExprPtr Parser::ParsePrimary() {
  const Token& t = Current();
  switch (t.kind) {
    case TokenKind::kName:
      Advance();
      if (t.text == "true" || t.text == "True") return std::make_unique<LiteralExpr>(t.offset, Value::Bool(true));
      if (t.text == "false" || t.text == "False") return std::make_unique<LiteralExpr>(t.offset, Value::Bool(false));
      if (t.text == "none" || t.text == "None") return std::make_unique<LiteralExpr>(t.offset, Value::None());
      NoteName(t.text);
      return std::make_unique<NameExpr>(t.offset, t.text);
    case TokenKind::kString: {
      std::string text;
      while (Current().kind == TokenKind::kString) text += Advance().text;  // "a" "b" is "ab"
      return std::make_unique<LiteralExpr>(t.offset, Value::String(std::move(text)));
    }
    case TokenKind::kInteger: Advance(); return std::make_unique<LiteralExpr>(t.offset, Value::Int(t.int_value));
    case TokenKind::kFloat: Advance(); return std::make_unique<LiteralExpr>(t.offset, Value::Float(t.float_value));
    default: break;
  }
  if (SkipOperator("(")) {
    ExprPtr inner = ParseTuple(true, {}, true);
    ExpectOperator(")");
    return inner;
  }
  if (SkipOperator("[")) {
    auto list = std::make_unique<ListExpr>(t.offset, false);
    while (!IsOperator("]")) {
      if (!list->items.empty()) ExpectOperator(",");
      if (IsOperator("]")) break;
      list->items.push_back(ParseExpression());
    }
    Advance();
    return list;
  }
  if (SkipOperator("{")) {
    auto dict = std::make_unique<DictExpr>(t.offset);
    while (!IsOperator("}")) {
      if (!dict->entries.empty()) ExpectOperator(",");
      if (IsOperator("}")) break;
      ExprPtr key = ParseExpression();
      ExpectOperator(":");
      dict->entries.emplace_back(std::move(key), ParseExpression());
    }
    Advance();
    return dict;
  }
  FailUnexpected("an expression");
}

ExprPtr Parser::ParseCall(ExprPtr callee) {
  uint32_t offset = callee->offset;  // errors in a call point at what is called
  auto call = std::make_unique<CallExpr>(offset, std::move(callee));
  ParseCallArgs(call->args);
  return call;
}

ExprPtr Parser::ParsePostfix(ExprPtr node) {
  while (true) {
    if (IsOperator(".") || IsOperator("[")) {
      node = ParseSubscript(std::move(node));
    } else if (IsOperator("(")) {
      node = ParseCall(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::ParseFilterAndTests(ExprPtr node) {
  while (true) {
    if (IsOperator("|")) {
      node = ParseFilter(std::move(node));
    } else if (IsName("is")) {
      node = ParseTest(std::move(node));
    } else if (IsOperator("(")) {
      node = ParseCall(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::ParseSubscript(ExprPtr node) {
  const Token& open = Advance();
  if (open.text == ".") {
    const Token& attr = Current();
    if (attr.kind == TokenKind::kName) {
      Advance();
      return std::make_unique<GetAttrExpr>(attr.offset, std::move(node), attr.text);
    }
    if (attr.kind != TokenKind::kInteger) FailUnexpected("an attribute name after '.'");
    Advance();
    return std::make_unique<GetItemExpr>(open.offset, std::move(node),
                                         std::make_unique<LiteralExpr>(attr.offset, Value::Int(attr.int_value)));
  }
  ExprPtr index;
  if (!IsOperator(":")) {
    index = ParseExpression();
    if (IsOperator(",")) {  // x[a, b] indexes with a tuple
      auto tuple = std::make_unique<ListExpr>(index->offset, true);
      tuple->items.push_back(std::move(index));
      while (SkipOperator(",") && !IsOperator("]")) tuple->items.push_back(ParseExpression());
      index = std::move(tuple);
    }
    if (!IsOperator(":")) {
      ExpectOperator("]");
      return std::make_unique<GetItemExpr>(open.offset, std::move(node), std::move(index));
    }
  }
  auto slice = std::make_unique<SliceExpr>(open.offset, std::move(node));
  slice->start = std::move(index);
  Advance();  // the ':'
  if (!IsOperator(":") && !IsOperator("]")) slice->stop = ParseExpression();
  if (SkipOperator(":") && !IsOperator("]")) slice->step = ParseExpression();
  ExpectOperator("]");
  return slice;
}

void Parser::ParseCallArgs(Arguments& args) {
  ExpectOperator("(");
  bool first = true;
  while (!IsOperator(")")) {
    if (!first) {
      ExpectOperator(",");
      if (IsOperator(")")) break;  // trailing comma
    }
    first = false;
    if (IsOperator("*") || IsOperator("**"))
      map_.Throw(ErrorCode::kUnsupported, Current().offset, "*args and **kwargs in calls are not supported");
    if (Current().kind == TokenKind::kName && IsOperator(Peek(), "=")) {
      std::string name = Advance().text;
      Advance();
      args.keyword.emplace_back(std::move(name), ParseExpression());
    } else {
      if (!args.keyword.empty()) Fail(Current().offset, "positional argument follows keyword argument");
      args.positional.push_back(ParseExpression());
    }
  }
  Advance();
}

ExprPtr Parser::ParseFilter(ExprPtr operand) {
  Advance();  // '|'
  const Token& name = ExpectName();
  auto filter = std::make_unique<FilterExpr>(name.offset, std::move(operand), name.text);
  while (SkipOperator(".")) filter->name += "." + ExpectName().text;
  CheckFilterExists(*filter);
  if (IsOperator("(")) ParseCallArgs(filter->args);
  return filter;
}

// `x is name`, `x is not name`, `x is name(args)`, and `x is name arg` with one argument.
ExprPtr Parser::ParseTest(ExprPtr operand) {
  Advance();  // 'is'
  bool negated = SkipName("not");
  const Token& name = ExpectName();
  auto test = std::make_unique<TestExpr>(name.offset, std::move(operand), name.text, negated);
  while (SkipOperator(".")) test->name += "." + ExpectName().text;
  if (FindTest(test->name) == nullptr)
    map_.Throw(ErrorCode::kUnsupported, test->offset, fmt::format("unknown test '{}'", test->name));
  const Token& t = Current();
  bool argument_start = t.kind == TokenKind::kName || t.kind == TokenKind::kString || t.kind == TokenKind::kInteger ||
                        t.kind == TokenKind::kFloat || IsOperator("[") || IsOperator("{");
  if (IsOperator("(")) {
    ParseCallArgs(test->args);
  } else if (argument_start && !IsName("else") && !IsName("or") && !IsName("and")) {
    if (IsName("is")) Fail(t.offset, "tests cannot be chained with 'is'");
    test->args.positional.push_back(ParsePostfix(ParsePrimary()));
  }
  return test;
}

}  // namespace infernix::jinja
