// Recursive-descent parser for the Jinja2 subset (see docs/chat-templates.md), following Jinja2's
// grammar and operator precedence.
#pragma once

#include <algorithm>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/jinja/ast.h"
#include "chat/jinja/eval_error.h"
#include "chat/jinja/lexer.h"

namespace infernix::jinja {

// Statements and expressions nest at most this deep; deeper templates are rejected rather than
// risking the stack.
inline constexpr int kMaxParseDepth = 128;

// Throws infernix::Error (kInvalidFormat, or kUnsupported for tags, filters and tests outside the
// subset) naming the line and column, e.g.
// "unexpected 'endfor', expected 'endif' (to close the 'if' at line 2, column 1)".
StmtList ParseTemplate(const std::vector<Token>& tokens, const SourceMap& map);

// The parser's state, shared by parser.cpp (statements) and parser_expr.cpp (expressions).
class Parser {
 public:
  Parser(const std::vector<Token>& tokens, const SourceMap& map) : tokens_(tokens), map_(map) {}
  StmtList ParseAll();

 private:
  // The tag a body belongs to, for "expected 'endif'" messages.
  struct OpenBlock {
    std::string_view tag;
    uint32_t offset;
    std::vector<std::string_view> ends;
  };

  // Counts nesting on the stack; fails beyond kMaxParseDepth.
  class DepthGuard {
   public:
    explicit DepthGuard(Parser& p);
    ~DepthGuard() { --parser_.depth_; }

   private:
    Parser& parser_;
  };

  // --- tokens (parser.cpp)
  const Token& Current() const { return tokens_[pos_]; }
  const Token& Peek() const { return tokens_[std::min(pos_ + 1, tokens_.size() - 1)]; }
  const Token& Advance() { return tokens_[pos_ + 1 < tokens_.size() ? pos_++ : pos_]; }
  bool IsOperator(std::string_view op) const { return IsOperator(Current(), op); }
  static bool IsOperator(const Token& t, std::string_view op) { return t.kind == TokenKind::kOperator && t.text == op; }
  bool IsName(std::string_view name) const { return Current().kind == TokenKind::kName && Current().text == name; }
  bool SkipOperator(std::string_view op);
  bool SkipName(std::string_view name);
  void ExpectOperator(std::string_view op);
  const Token& ExpectName();
  void ExpectBlockEnd();
  std::string Describe(const Token& t) const;
  [[noreturn]] void Fail(uint32_t offset, std::string_view message) const;
  [[noreturn]] void FailUnexpected(std::string_view expected) const;

  // --- statements (parser.cpp)
  // Parses statements up to a `{%` tag named one of open.ends; leaves Current() on that name.
  StmtList ParseBody(OpenBlock open);
  // After a tag's header: an optional ':', the '%}', then the body up to one of `ends` (the parser
  // is left on that end name).
  StmtList ParseStatements(std::string_view tag, uint32_t offset, std::vector<std::string_view> ends);
  // Consumes the closing tag's name and its '%}'.
  void FinishEndTag();
  StmtPtr ParseStatement(uint32_t tag_offset);
  [[noreturn]] void FailUnknownTag(const Token& tag) const;
  StmtPtr ParseIf(uint32_t offset);
  StmtPtr ParseFor(uint32_t offset);
  StmtPtr ParseSet(uint32_t offset);
  StmtPtr ParseMacro(uint32_t offset);
  StmtPtr ParseCallBlock(uint32_t offset);
  StmtPtr ParseFilterBlock(uint32_t offset);
  StmtPtr ParseWith(uint32_t offset);
  StmtPtr ParseScope(uint32_t offset, std::string_view end);
  void ParseSignature(MacroDef& def);
  // `| f(args) | g`: filters without an operand; the first '|' is optional when start_inline.
  std::vector<std::unique_ptr<FilterExpr>> ParseFilterChain(bool start_inline);

  // --- expressions (parser_expr.cpp)
  ExprPtr ParseTuple(bool with_condition, std::vector<std::string_view> extra_ends = {}, bool in_parens = false);
  ExprPtr ParseAssignTarget(bool with_tuple, bool with_namespace, std::vector<std::string_view> extra_ends = {});
  ExprPtr ParseExpression(bool with_condition = true);
  // `operand (op operand)*`, left-associative, for the operators `ops` (spelling, operator).
  ExprPtr ParseBinary(std::span<const std::pair<std::string_view, BinaryOp>> ops, ExprPtr (Parser::*operand)());
  ExprPtr ParseOr();
  ExprPtr ParseAnd();
  ExprPtr ParseNot();
  ExprPtr ParseCompare();
  ExprPtr ParseAdditive();
  ExprPtr ParseConcat();
  ExprPtr ParseMultiplicative();
  ExprPtr ParsePower();
  ExprPtr ParseUnary(bool with_filter);
  ExprPtr ParseUnaryWithFilters();
  ExprPtr ParsePrimary();
  ExprPtr ParsePostfix(ExprPtr node);
  ExprPtr ParseCall(ExprPtr callee);
  ExprPtr ParseFilterAndTests(ExprPtr node);
  ExprPtr ParseSubscript(ExprPtr node);
  ExprPtr ParseFilter(ExprPtr operand);
  ExprPtr ParseTest(ExprPtr operand);
  void ParseCallArgs(Arguments& args);
  bool IsTupleEnd(const std::vector<std::string_view>& extra_ends) const;
  void NoteName(std::string_view name);
  // Unknown filters and tests are errors when the template is parsed, as in Jinja2.
  void CheckFilterExists(const FilterExpr& filter) const;

  const std::vector<Token>& tokens_;
  const SourceMap& map_;
  size_t pos_ = 0;
  int depth_ = 0;
  std::vector<OpenBlock> open_blocks_;
  std::vector<MacroDef*> macros_;  // macros (and call blocks) being parsed, innermost last
  int loop_depth_ = 0;             // enclosing for loops within the current macro body
};

}  // namespace infernix::jinja
