// Helpers for the template engine's tests.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "chat/jinja/template.h"

namespace infernix::jinja::testing {

// Parses and renders `source` with the entries of the JSON object `variables`.
inline std::string Render(std::string_view source, const nlohmann::ordered_json& variables = nullptr) {
  return Template::Parse(source, "test")->Render(variables);
}

// The message of the infernix::Error that parsing or rendering `source` throws ("" if none).
inline std::string RenderError(std::string_view source, const nlohmann::ordered_json& variables = nullptr,
                               ErrorCode* code = nullptr) {
  try {
    Render(source, variables);
  } catch (const Error& e) {
    if (code != nullptr) *code = e.code();
    return e.what();
  }
  return "";
}

// gtest matcher-like check: `text` contains `part`.
inline ::testing::AssertionResult Contains(const std::string& text, std::string_view part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

}  // namespace infernix::jinja::testing
