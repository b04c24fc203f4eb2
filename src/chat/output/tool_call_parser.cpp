#include "chat/output/tool_call_parser.h"

#include <algorithm>
#include <utility>

#include "base/check.h"
#include "chat/output/tool_schema.h"

namespace infernix {
namespace {

using Json = nlohmann::ordered_json;
using output::IsSpace;
using output::Match;
using output::MatchLiteral;

// A name longer than this, or one broken by a newline or '<', means the tag is not what it seemed.
constexpr size_t kMaxNameLength = 256;

std::string_view Trim(std::string_view text) {
  while (!text.empty() && IsSpace(text.front())) text.remove_prefix(1);
  while (!text.empty() && IsSpace(text.back())) text.remove_suffix(1);
  return text;
}

size_t SkipSpace(std::string_view text, size_t i) {
  while (i < text.size() && IsSpace(text[i])) ++i;
  return i;
}

// The best of the matches of alternatives at the same place.
Match Either(Match a, Match b) {
  if (a == Match::kYes || b == Match::kYes) return Match::kYes;
  if (a == Match::kPartial || b == Match::kPartial) return Match::kPartial;
  return Match::kNo;
}

Match Decide(Match m, bool at_end) { return m == Match::kPartial && at_end ? Match::kNo : m; }

// `tag` at the front of `text`, then optional whitespace, then the end of the stream or (the start of,
// at the end of the stream) a tag that may follow it in an XML call: "</tool_call>", and also
// "<parameter=" and "</function>" when parameter_may_follow.
Match MatchClosingTag(std::string_view text, std::string_view tag, bool at_end, bool parameter_may_follow) {
  Match m = MatchLiteral(text, tag);
  if (m != Match::kYes) return Decide(m, at_end);
  size_t i = SkipSpace(text, tag.size());
  if (i == text.size()) return at_end ? Match::kYes : Match::kPartial;
  std::string_view next = text.substr(i);
  Match follow = MatchLiteral(next, output::kToolCallClose);
  if (parameter_may_follow)
    follow = Either(follow, Either(MatchLiteral(next, output::kParameterOpen),
                                   MatchLiteral(next, output::kFunctionClose)));
  // At the end of the stream, the start of a following tag is enough.
  return follow == Match::kPartial && at_end ? Match::kYes : follow;
}

// A complete JSON-form call: {"name": non-empty string, "arguments" (or "parameters"): an object, a
// string holding one, null or absent}. On success sets the name and the compact arguments text.
bool ParseJsonCall(std::string_view text, std::string* name, std::string* arguments) {
  Json call = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (call.is_discarded() || !call.is_object()) return false;
  auto name_it = call.find("name");
  if (name_it == call.end() || !name_it->is_string() || name_it->get_ref<const std::string&>().empty())
    return false;
  auto args_it = call.find("arguments");
  if (args_it == call.end()) args_it = call.find("parameters");
  Json args = args_it == call.end() || args_it->is_null() ? Json::object() : *args_it;
  if (args.is_string()) args = Json::parse(args.get_ref<const std::string&>(), nullptr, false);
  if (args.is_discarded() || !args.is_object()) return false;
  *name = name_it->get<std::string>();
  *arguments = DumpJson(args);
  return true;
}

}  // namespace

ToolCallParser::ToolCallParser(ToolCallParserOptions options) : options_(std::move(options)) {
  INFX_CHECK(options_.make_call_id != nullptr);
}

ToolCallParserDelta ToolCallParser::Push(std::string_view text) {
  buf_.append(text);
  Run(false);
  return std::exchange(out_, {});
}

ToolCallParserDelta ToolCallParser::Finish() {
  Run(true);
  FinishStream();
  buf_.clear();
  pos_ = 0;
  hold_ = kNone;
  return std::exchange(out_, {});
}

void ToolCallParser::Run(bool at_end) {
  while (pos_ < buf_.size() && Step(at_end)) {
  }
  // Drop what was consumed, keeping held raw text.
  size_t keep = std::min(pos_, hold_);
  if (keep == 0) return;
  buf_.erase(0, keep);
  pos_ -= keep;
  if (hold_ != kNone) hold_ -= keep;
  if (state_ == State::kJson) {
    scan_ -= keep;
    if (object_begin_ != kNone) object_begin_ -= keep;
    if (object_end_ != kNone) object_end_ -= keep;
  }
}

bool ToolCallParser::Step(bool at_end) {
  switch (state_) {
    case State::kText: return StepText(at_end);
    case State::kJson: return StepJson(at_end);
    case State::kXmlName: return StepXmlName();
    case State::kXmlBetween: return StepXmlBetween(at_end);
    case State::kXmlParamName: return StepXmlParamName();
    case State::kXmlValue: return StepXmlValue(at_end);
    case State::kXmlAfterFunction: return StepXmlAfterFunction(at_end);
    case State::kDone:
      pos_ = buf_.size();  // after the turn's one call: ignored
      return true;
  }
  return false;
}

void ToolCallParser::EmitContent(std::string_view text) {
  fence_.Feed(text);
  out_.content += trimmer_.Add(text);
}

void ToolCallParser::Abandon(size_t end, State next) {
  EmitContent(std::string_view(buf_).substr(hold_, end - hold_));
  pos_ = end;
  hold_ = kNone;
  state_ = next;
}

bool ToolCallParser::StepText(bool at_end) {
  std::string_view rest = std::string_view(buf_).substr(pos_);
  size_t lt = rest.find('<');
  if (lt != 0) {
    size_t n = std::min(lt, rest.size());
    EmitContent(rest.substr(0, n));
    pos_ += n;
    return true;
  }
  output::ToolCallForm form = output::ToolCallForm::kJson;
  Match start = fence_.InFenceBeforeMarkup() ? Match::kNo : output::MatchToolCallStart(rest, at_end, &form);
  if (start == Match::kPartial) return false;
  if (start == Match::kNo) {
    EmitContent("<");
    ++pos_;
    return true;
  }
  hold_ = pos_;
  pos_ += output::kToolCallOpen.size();
  if (form == output::ToolCallForm::kJson) {
    state_ = State::kJson;
    scan_ = pos_;
    object_begin_ = object_end_ = kNone;
    depth_ = 0;
    in_string_ = escape_ = false;
  } else {
    pos_ = SkipSpace(buf_, pos_) + output::kFunctionOpen.size();
    state_ = State::kXmlName;
  }
  return true;
}

bool ToolCallParser::StepJson(bool at_end) {
  while (object_end_ == kNone) {
    if (scan_ == buf_.size()) return false;  // at the end, FinishStream makes it content
    char c = buf_[scan_];
    if (in_string_) {
      if (escape_) {
        escape_ = false;
      } else if (c == '\\') {
        escape_ = true;
      } else if (c == '"') {
        in_string_ = false;
      }
    } else if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      if (object_begin_ == kNone) object_begin_ = scan_;
      ++depth_;
    } else if (depth_ > 0 && (c == '}' || c == ']')) {
      if (--depth_ == 0) object_end_ = scan_ + 1;
    } else if (c == '<' || (depth_ == 0 && !IsSpace(c))) {
      Abandon(scan_, State::kText);  // markup where JSON should be: this was no call
      return true;
    }
    ++scan_;
  }
  size_t close = SkipSpace(buf_, object_end_);
  Match m = Decide(MatchLiteral(std::string_view(buf_).substr(close), output::kToolCallClose), at_end);
  if (m == Match::kPartial) return false;
  if (m == Match::kNo) {
    Abandon(object_end_, State::kText);
    return true;
  }
  size_t end = close + output::kToolCallClose.size();
  std::string name, arguments;
  std::string_view object = std::string_view(buf_).substr(object_begin_, object_end_ - object_begin_);
  if (!ParseJsonCall(object, &name, &arguments)) {
    Abandon(end, State::kText);
    return true;
  }
  StartCall(name);
  EmitArguments(arguments);
  hold_ = kNone;
  pos_ = end;
  EndCall();
  return true;
}

bool ToolCallParser::StepXmlName() {
  std::string_view rest = std::string_view(buf_).substr(pos_);
  size_t end = std::min(rest.find_first_of(">\n<"), rest.size());
  if (end == rest.size() && end <= kMaxNameLength) return false;  // at the end, FinishStream abandons it
  std::string_view name = Trim(rest.substr(0, end));
  if (end == rest.size() || rest[end] != '>' || end > kMaxNameLength || name.empty()) {
    Abandon(pos_ + end, State::kText);
    return true;
  }
  StartCall(std::string(name));
  const Json* parameters = FindToolParameters(options_.tools, name);
  parameters_ = parameters ? *parameters : Json();
  arguments_open_ = false;
  after_stray_ = false;
  hold_ = kNone;
  pos_ += end + 1;
  state_ = State::kXmlBetween;
  return true;
}

bool ToolCallParser::StepXmlBetween(bool at_end) {
  std::string_view rest = std::string_view(buf_).substr(pos_);
  // Whitespace before a tag is dropped, unless it follows stray text (kept, as content).
  size_t first = after_stray_ ? 0 : SkipSpace(rest, 0);
  if (first == rest.size()) return false;  // at the end, FinishStream drops it
  if (rest[first] != '<') {
    size_t n = std::min(rest.find('<'), rest.size());
    EmitContent(rest.substr(0, n));
    pos_ += n;
    after_stray_ = true;
    return true;
  }
  pos_ += first;
  rest.remove_prefix(first);
  after_stray_ = false;
  Match param = MatchLiteral(rest, output::kParameterOpen);
  Match function_end = MatchLiteral(rest, output::kFunctionClose);
  Match call_end = MatchLiteral(rest, output::kToolCallClose);
  if (param == Match::kYes) {
    hold_ = pos_;
    pos_ += output::kParameterOpen.size();
    state_ = State::kXmlParamName;
  } else if (function_end == Match::kYes) {
    pos_ += output::kFunctionClose.size();
    CloseArguments();
    state_ = State::kXmlAfterFunction;
  } else if (call_end == Match::kYes) {  // "</function>" forgotten
    pos_ += output::kToolCallClose.size();
    CloseArguments();
    EndCall();
  } else if (!at_end && Either(param, Either(function_end, call_end)) == Match::kPartial) {
    return false;
  } else {
    EmitContent("<");
    ++pos_;
    after_stray_ = true;
  }
  return true;
}

bool ToolCallParser::StepXmlParamName() {
  std::string_view rest = std::string_view(buf_).substr(pos_);
  size_t end = std::min(rest.find_first_of(">\n<"), rest.size());
  if (end == rest.size() && end <= kMaxNameLength) return false;  // at the end, FinishStream abandons it
  std::string_view name = Trim(rest.substr(0, end));
  if (end == rest.size() || rest[end] != '>' || end > kMaxNameLength || name.empty()) {
    Abandon(pos_ + end, State::kXmlBetween);
    after_stray_ = true;
    return true;
  }
  StartParameter(name);
  hold_ = kNone;
  pos_ += end + 1;
  state_ = State::kXmlValue;
  return true;
}

bool ToolCallParser::StepXmlValue(bool at_end) {
  std::string_view rest = std::string_view(buf_).substr(pos_);
  if (!value_started_) {
    value_started_ = true;
    if (rest[0] == '\n') ++pos_;  // the newline after <parameter=name>
    return true;
  }
  size_t lt = rest.find('<');
  if (lt != 0) {
    size_t n = std::min(lt, rest.size());
    AddValue(rest.substr(0, n));
    pos_ += n;
    return true;
  }
  // A value ends at "</parameter>" followed by the next parameter, "</function>" or "</tool_call>", or
  // (the model forgot "</parameter>") at "</function>" followed by "</tool_call>". Other occurrences
  // are text of the value (code that mentions the tags).
  Match param_end = MatchClosingTag(rest, output::kParameterClose, at_end, true);
  Match function_end = MatchClosingTag(rest, output::kFunctionClose, at_end, false);
  if (param_end == Match::kYes) {
    pos_ += output::kParameterClose.size();
  } else if (function_end != Match::kYes) {
    if (Either(param_end, function_end) == Match::kPartial) return false;
    AddValue("<");
    ++pos_;
    return true;
  }
  FinishParameter();
  after_stray_ = false;
  state_ = State::kXmlBetween;
  return true;
}

bool ToolCallParser::StepXmlAfterFunction(bool at_end) {
  std::string_view rest = std::string_view(buf_).substr(pos_);
  size_t first = SkipSpace(rest, 0);
  pos_ += first;
  rest.remove_prefix(first);
  if (rest.empty()) return false;
  Match m = Decide(MatchLiteral(rest, output::kToolCallClose), at_end);
  if (m == Match::kPartial) return false;
  if (m == Match::kYes) pos_ += output::kToolCallClose.size();
  EndCall();
  return true;
}

void ToolCallParser::FinishStream() {
  switch (state_) {
    case State::kText:
    case State::kDone:
      break;
    case State::kJson:
    case State::kXmlName:
      Abandon(buf_.size(), State::kText);
      break;
    case State::kXmlParamName:
      Abandon(buf_.size(), State::kXmlBetween);
      CloseArguments();
      EndCall();
      break;
    case State::kXmlValue:
      FinishParameter();
      CloseArguments();
      EndCall();
      break;
    case State::kXmlBetween:
      CloseArguments();
      EndCall();
      break;
    case State::kXmlAfterFunction:
      EndCall();
      break;
  }
}

void ToolCallParser::StartCall(const std::string& name) {
  index_ = calls_++;
  out_.tool_calls.push_back(ToolCallDelta{index_, options_.make_call_id(), name, ""});
}

void ToolCallParser::EmitArguments(std::string_view fragment) {
  if (fragment.empty()) return;
  if (out_.tool_calls.empty() || out_.tool_calls.back().index != index_)
    out_.tool_calls.push_back(ToolCallDelta{index_, "", "", ""});
  out_.tool_calls.back().arguments_fragment += fragment;
}

void ToolCallParser::StartParameter(std::string_view name) {
  const Json* properties = nullptr;
  if (auto it = parameters_.find("properties"); parameters_.is_object() && it != parameters_.end() && it->is_object())
    properties = &*it;
  param_types_ = ParameterTypes(properties, name, &parameters_);
  std::string fragment = arguments_open_ ? ",\"" : "{\"";
  arguments_open_ = true;
  output::AppendJsonEscaped(name, &fragment);
  fragment += AlwaysString(param_types_) ? "\":\"" : "\":";
  EmitArguments(fragment);
  value_started_ = false;
  held_newline_ = false;
  value_.clear();
}

void ToolCallParser::AddValue(std::string_view text) {
  std::string piece = held_newline_ ? "\n" : "";
  piece += text;
  held_newline_ = !piece.empty() && piece.back() == '\n';  // perhaps the newline before </parameter>
  if (held_newline_) piece.pop_back();
  if (!AlwaysString(param_types_)) {
    value_ += piece;
    return;
  }
  std::string escaped;
  output::AppendJsonEscaped(piece, &escaped);
  EmitArguments(escaped);
}

void ToolCallParser::FinishParameter() {
  held_newline_ = false;
  EmitArguments(AlwaysString(param_types_) ? "\"" : ConvertParameterValue(value_, param_types_));
  value_.clear();
}

void ToolCallParser::CloseArguments() { EmitArguments(arguments_open_ ? "}" : "{}"); }

void ToolCallParser::EndCall() {
  state_ = options_.single_call ? State::kDone : State::kText;
  trimmer_.StartSegment();
  fence_.StartLine();
}

}  // namespace infernix
