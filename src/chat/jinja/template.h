// A parsed Jinja2 template (the subset chat templates use; see docs/chat-templates.md), rendered
// with the semantics of transformers' chat-template environment: trim_blocks and lstrip_blocks on,
// loop controls, transformers' tojson, raise_exception and strftime_now.
//
// Parse once, render many times: Render is const and may run concurrently from several threads.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/jinja/ast.h"
#include "chat/jinja/eval_error.h"
#include "chat/jinja/value.h"

namespace infernix::jinja {

class Template {
 public:
  using Variables = std::vector<std::pair<std::string, Value>>;

  // `name` prefixes error messages ("NAME, line L, column C: ..."). Throws infernix::Error:
  // kInvalidFormat for syntax errors, kUnsupported for constructs outside the subset.
  static std::unique_ptr<Template> Parse(std::string_view source, std::string name);

  // Renders with `variables` as the template's global names (a later entry replaces an earlier
  // one of the same name). The values must not be shared with another thread's render (containers
  // are mutable). Throws infernix::Error naming the line and column for runtime errors, including
  // raise_exception().
  std::string Render(Variables variables) const;
  // The same with the entries of a JSON object (or null: none) as variables.
  std::string Render(const nlohmann::ordered_json& variables) const;

  const std::string& name() const { return map_.name(); }

 private:
  Template(std::string name, std::string source);

  std::string source_;  // normalised
  SourceMap map_;
  StmtList body_;
};

}  // namespace infernix::jinja
