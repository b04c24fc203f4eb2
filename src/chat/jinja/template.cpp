#include "chat/jinja/template.h"

#include "chat/jinja/builtins.h"
#include "chat/jinja/interpreter.h"
#include "chat/jinja/json.h"
#include "chat/jinja/lexer.h"
#include "chat/jinja/parser.h"

namespace infernix::jinja {

Template::Template(std::string name, std::string source) : source_(std::move(source)), map_(std::move(name), source_) {}

std::unique_ptr<Template> Template::Parse(std::string_view source, std::string name) {
  std::unique_ptr<Template> t(new Template(std::move(name), NormalizeSource(source)));
  t->body_ = ParseTemplate(Tokenize(t->source_, t->map_), t->map_);
  return t;
}

std::string Template::Render(Variables variables) const {
  auto globals = std::make_shared<Frame>();
  AddGlobals(*globals);
  auto context = std::make_shared<Frame>(globals);
  for (auto& [name, value] : variables) context->Set(name, std::move(value));
  auto top = std::make_shared<Frame>(context);
  std::string out;
  try {
    Interpreter(map_, out).Run(body_, top);
  } catch (const EvalError& e) {  // normally positioned by the interpreter already
    throw Error(e.code(), fmt::format("{}: {}", map_.name(), e.what()));
  }
  return out;
}

std::string Template::Render(const nlohmann::ordered_json& variables) const {
  if (!variables.is_null() && !variables.is_object())
    ThrowError(ErrorCode::kInvalidArgument, "{}: template variables must be a JSON object, got {}", map_.name(),
               variables.type_name());
  Variables values;
  if (variables.is_object()) {
    for (const auto& [name, value] : variables.items()) {
      try {
        values.emplace_back(name, FromJson(value));
      } catch (const EvalError& e) {
        ThrowError(e.code(), "{}: variable '{}': {}", map_.name(), name, e.what());
      }
    }
  }
  return Render(std::move(values));
}

}  // namespace infernix::jinja
