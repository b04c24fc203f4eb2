// Statements: the template body and its tags.
#include "chat/jinja/parser.h"

namespace infernix::jinja {

StmtList ParseTemplate(const std::vector<Token>& tokens, const SourceMap& map) { return Parser(tokens, map).ParseAll(); }

Parser::DepthGuard::DepthGuard(Parser& p) : parser_(p) {
  if (++parser_.depth_ > kMaxParseDepth) {
    --parser_.depth_;
    parser_.Fail(parser_.Current().offset, fmt::format("template nested deeper than {} levels", kMaxParseDepth));
  }
}

bool Parser::SkipOperator(std::string_view op) {
  if (!IsOperator(op)) return false;
  Advance();
  return true;
}

bool Parser::SkipName(std::string_view name) {
  if (!IsName(name)) return false;
  Advance();
  return true;
}

void Parser::ExpectOperator(std::string_view op) {
  if (!SkipOperator(op)) FailUnexpected(fmt::format("'{}'", op));
}

const Token& Parser::ExpectName() {
  if (Current().kind != TokenKind::kName) FailUnexpected("a name");
  return Advance();
}

void Parser::ExpectBlockEnd() {
  if (Current().kind != TokenKind::kBlockEnd) FailUnexpected("'%}'");
  Advance();
}

std::string Parser::Describe(const Token& t) const {
  switch (t.kind) {
    case TokenKind::kText: return "template text";
    case TokenKind::kVariableBegin: return "'{{'";
    case TokenKind::kVariableEnd: return "'}}'";
    case TokenKind::kBlockBegin: return "'{%'";
    case TokenKind::kBlockEnd: return "'%}'";
    case TokenKind::kString: return "a string";
    case TokenKind::kInteger:
    case TokenKind::kFloat: return fmt::format("number {}", t.text);
    case TokenKind::kEnd: return "end of template";
    default: return fmt::format("'{}'", t.text);
  }
}

void Parser::Fail(uint32_t offset, std::string_view message) const {
  map_.Throw(ErrorCode::kInvalidFormat, offset, message);
}

void Parser::FailUnexpected(std::string_view expected) const {
  Fail(Current().offset, fmt::format("unexpected {}, expected {}", Describe(Current()), expected));
}

namespace {

std::string Alternatives(const std::vector<std::string_view>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += fmt::format("{}'{}'", i == 0 ? "" : " or ", names[i]);
  return out;
}

}  // namespace

StmtList Parser::ParseAll() { return ParseBody(OpenBlock{"", 0, {}}); }

StmtList Parser::ParseBody(OpenBlock open) {
  DepthGuard guard(*this);
  bool top = open.ends.empty();
  if (!top) open_blocks_.push_back(open);
  StmtList body;
  while (true) {
    const Token& t = Current();
    switch (t.kind) {
      case TokenKind::kText:
        body.push_back(std::make_unique<TextStmt>(t.offset, t.text));
        Advance();
        break;
      case TokenKind::kVariableBegin: {
        Advance();
        ExprPtr expr = ParseTuple(true);
        if (Current().kind != TokenKind::kVariableEnd) FailUnexpected("'}}'");
        Advance();
        body.push_back(std::make_unique<PrintStmt>(t.offset, std::move(expr)));
        break;
      }
      case TokenKind::kBlockBegin:
        Advance();
        if (!top && Current().kind == TokenKind::kName &&
            std::find(open.ends.begin(), open.ends.end(), Current().text) != open.ends.end()) {
          open_blocks_.pop_back();
          return body;
        }
        body.push_back(ParseStatement(t.offset));
        break;
      case TokenKind::kEnd:
        if (top) return body;
        Fail(t.offset, fmt::format("unexpected end of template, expected {} (to close the '{}' at {})",
                                   Alternatives(open.ends), open.tag, map_.LineColumn(open.offset)));
      default: FailUnexpected("template text or a tag");
    }
  }
}

StmtList Parser::ParseStatements(std::string_view tag, uint32_t offset, std::vector<std::string_view> ends) {
  SkipOperator(":");
  ExpectBlockEnd();
  return ParseBody(OpenBlock{tag, offset, std::move(ends)});
}

void Parser::FinishEndTag() {
  Advance();
  ExpectBlockEnd();
}

void Parser::FailUnknownTag(const Token& tag) const {
  std::string_view name = tag.text;
  bool closing = name.starts_with("end") || name == "else" || name == "elif";
  if (!closing) map_.Throw(ErrorCode::kUnsupported, tag.offset, fmt::format("unknown tag '{}'", name));
  if (open_blocks_.empty()) Fail(tag.offset, fmt::format("unexpected '{}': there is no open block to close", name));
  const OpenBlock& open = open_blocks_.back();
  Fail(tag.offset, fmt::format("unexpected '{}', expected {} (to close the '{}' at {})", name, Alternatives(open.ends),
                               open.tag, map_.LineColumn(open.offset)));
}

StmtPtr Parser::ParseStatement(uint32_t tag_offset) {
  const Token& tag = Current();
  if (tag.kind != TokenKind::kName) FailUnexpected("a tag name");
  std::string_view name = tag.text;
  if (name == "if") return ParseIf(tag_offset);
  if (name == "for") return ParseFor(tag_offset);
  if (name == "set") return ParseSet(tag_offset);
  if (name == "macro") return ParseMacro(tag_offset);
  if (name == "call") return ParseCallBlock(tag_offset);
  if (name == "filter") return ParseFilterBlock(tag_offset);
  if (name == "with") return ParseWith(tag_offset);
  if (name == "generation") return ParseScope(tag_offset, "endgeneration");
  if (name == "autoescape") {
    Advance();
    ParseExpression();  // autoescaping does not apply: output is never HTML-escaped
    auto scope = std::make_unique<ScopeStmt>(tag_offset);
    scope->body = ParseStatements("autoescape", tag_offset, {"endautoescape"});
    FinishEndTag();
    return scope;
  }
  if (name == "print") {
    Advance();
    auto print = std::make_unique<PrintStmt>(tag_offset, ParseTuple(true));
    ExpectBlockEnd();
    return print;
  }
  if (name == "break" || name == "continue") {
    if (loop_depth_ == 0) Fail(tag.offset, fmt::format("'{}' outside of a for loop", name));
    Advance();
    ExpectBlockEnd();
    return std::make_unique<Stmt>(name == "break" ? StmtKind::kBreak : StmtKind::kContinue, tag_offset);
  }
  if (name == "block" || name == "extends" || name == "include" || name == "import" || name == "from")
    map_.Throw(ErrorCode::kUnsupported, tag.offset,
               fmt::format("the '{}' tag is not supported: chat templates are rendered on their own", name));
  FailUnknownTag(tag);
}

StmtPtr Parser::ParseIf(uint32_t offset) {
  Advance();
  auto node = std::make_unique<IfStmt>(offset);
  while (true) {
    ExprPtr condition = ParseTuple(false);
    StmtList body = ParseStatements("if", offset, {"elif", "else", "endif"});
    node->branches.emplace_back(std::move(condition), std::move(body));
    std::string_view end = Advance().text;
    if (end == "elif") continue;
    if (end == "else") {
      node->else_body = ParseStatements("if", offset, {"endif"});
      Advance();
    }
    break;
  }
  ExpectBlockEnd();
  return node;
}

StmtPtr Parser::ParseFor(uint32_t offset) {
  Advance();
  auto node = std::make_unique<ForStmt>(offset);
  node->target = ParseAssignTarget(true, false, {"in"});
  if (!SkipName("in")) FailUnexpected("'in'");
  node->iterable = ParseTuple(false, {"recursive"});
  if (SkipName("if")) node->filter = ParseExpression();
  if (IsName("recursive"))
    map_.Throw(ErrorCode::kUnsupported, Current().offset, "recursive for loops are not supported");
  ++loop_depth_;
  node->body = ParseStatements("for", offset, {"endfor", "else"});
  --loop_depth_;
  if (Advance().text == "else") {
    node->else_body = ParseStatements("for", offset, {"endfor"});
    Advance();
  }
  ExpectBlockEnd();
  return node;
}

StmtPtr Parser::ParseSet(uint32_t offset) {
  Advance();
  ExprPtr target = ParseAssignTarget(true, true);
  if (SkipOperator("=")) {
    auto node = std::make_unique<SetStmt>(offset, std::move(target), ParseTuple(true));
    ExpectBlockEnd();
    return node;
  }
  if (target->kind == ExprKind::kList) Fail(target->offset, "a block set assigns a single name");
  auto node = std::make_unique<SetBlockStmt>(offset, std::move(target));
  if (IsOperator("|")) node->filters = ParseFilterChain(false);
  node->body = ParseStatements("set", offset, {"endset"});
  FinishEndTag();
  return node;
}

void Parser::ParseSignature(MacroDef& def) {
  ExpectOperator("(");
  while (!IsOperator(")")) {
    if (!def.params.empty()) ExpectOperator(",");
    MacroParam param{ExpectName().text, nullptr};
    if (SkipOperator("=")) {
      param.default_value = ParseExpression();
    } else if (!def.params.empty() && def.params.back().default_value) {
      Fail(Current().offset, fmt::format("parameter '{}' without a default follows one with a default", param.name));
    }
    def.params.push_back(std::move(param));
  }
  Advance();
}

StmtPtr Parser::ParseMacro(uint32_t offset) {
  Advance();
  auto node = std::make_unique<MacroStmt>(offset);
  node->def.name = ExpectName().text;
  node->def.offset = offset;
  macros_.push_back(&node->def);
  int saved_loop_depth = std::exchange(loop_depth_, 0);
  ParseSignature(node->def);
  node->def.body = ParseStatements("macro", offset, {"endmacro"});
  loop_depth_ = saved_loop_depth;
  macros_.pop_back();
  FinishEndTag();
  return node;
}

StmtPtr Parser::ParseCallBlock(uint32_t offset) {
  Advance();
  auto node = std::make_unique<CallBlockStmt>(offset);
  node->caller.name = "caller";
  node->caller.offset = offset;
  if (IsOperator("(")) ParseSignature(node->caller);
  node->call = ParseExpression();
  if (node->call->kind != ExprKind::kCall) Fail(node->call->offset, "expected a macro call after 'call'");
  macros_.push_back(&node->caller);
  int saved_loop_depth = std::exchange(loop_depth_, 0);
  node->caller.body = ParseStatements("call", offset, {"endcall"});
  loop_depth_ = saved_loop_depth;
  macros_.pop_back();
  FinishEndTag();
  return node;
}

std::vector<std::unique_ptr<FilterExpr>> Parser::ParseFilterChain(bool start_inline) {
  std::vector<std::unique_ptr<FilterExpr>> filters;
  while (start_inline || SkipOperator("|")) {
    start_inline = false;
    const Token& name = ExpectName();
    auto filter = std::make_unique<FilterExpr>(name.offset, nullptr, name.text);
    while (SkipOperator(".")) filter->name += "." + ExpectName().text;
    CheckFilterExists(*filter);
    if (IsOperator("(")) ParseCallArgs(filter->args);
    filters.push_back(std::move(filter));
  }
  return filters;
}

StmtPtr Parser::ParseFilterBlock(uint32_t offset) {
  Advance();
  auto node = std::make_unique<FilterBlockStmt>(offset);
  node->filters = ParseFilterChain(true);
  node->body = ParseStatements("filter", offset, {"endfilter"});
  FinishEndTag();
  return node;
}

StmtPtr Parser::ParseWith(uint32_t offset) {
  Advance();
  auto node = std::make_unique<WithStmt>(offset);
  while (Current().kind != TokenKind::kBlockEnd) {
    if (!node->assignments.empty()) ExpectOperator(",");
    ExprPtr target = ParseAssignTarget(true, false);
    ExpectOperator("=");
    node->assignments.emplace_back(std::move(target), ParseExpression());
  }
  node->body = ParseStatements("with", offset, {"endwith"});
  FinishEndTag();
  return node;
}

StmtPtr Parser::ParseScope(uint32_t offset, std::string_view end) {
  std::string_view tag = Advance().text;
  auto node = std::make_unique<ScopeStmt>(offset);
  node->body = ParseStatements(tag, offset, {end});
  FinishEndTag();
  return node;
}

}  // namespace infernix::jinja
