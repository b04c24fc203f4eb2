#include "engine/stop_matcher.h"

#include <algorithm>
#include <utility>

#include "base/error.h"

namespace infernix {
namespace {

bool IsContinuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }

// Length of the UTF-8 sequence a lead byte announces; 1 for bytes that cannot lead one.
size_t SequenceLength(unsigned char lead) {
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  return 1;
}

// Well-formed UTF-8 (no overlong forms, surrogates or code points above U+10FFFF).
bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto lead = static_cast<unsigned char>(s[i]);
    if (lead < 0x80) {
      ++i;
      continue;
    }
    const size_t len = SequenceLength(lead);
    if (len == 1 || i + len > s.size()) return false;
    const auto second = static_cast<unsigned char>(s[i + 1]);
    unsigned char lo = 0x80, hi = 0xBF;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
    if (second < lo || second > hi) return false;
    for (size_t j = 2; j < len; ++j)
      if (!IsContinuation(static_cast<unsigned char>(s[i + j]))) return false;
    i += len;
  }
  return true;
}

// Moves `cut` back so that text[0, cut) does not end inside a UTF-8 character.
size_t CharBoundaryAtOrBefore(std::string_view text, size_t cut) {
  size_t lead = cut;
  while (lead > 0 && cut - lead < 4 && IsContinuation(static_cast<unsigned char>(text[lead - 1]))) --lead;
  if (lead == 0 || cut - lead >= 4) return cut;  // no lead byte within reach: not ours to repair
  --lead;                                         // text[lead] is the last byte that is not a continuation
  const size_t len = SequenceLength(static_cast<unsigned char>(text[lead]));
  return len > cut - lead ? lead : cut;
}

}  // namespace

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  if (stops.size() > kMaxStops)
    ThrowError(ErrorCode::kInvalidArgument, "stop: expected at most {} stop strings, got {}", kMaxStops,
               stops.size());
  for (size_t i = 0; i < stops.size(); ++i) {
    if (!IsValidUtf8(stops[i])) ThrowError(ErrorCode::kInvalidArgument, "stop[{}]: not valid UTF-8", i);
    if (stops[i].empty()) continue;
    Stop stop{std::move(stops[i]), {}, 0};
    const std::string& t = stop.text;
    stop.fallback.assign(t.size(), 0);
    for (size_t j = 1, k = 0; j < t.size(); ++j) {
      while (k > 0 && t[j] != t[k]) k = stop.fallback[k - 1];
      if (t[j] == t[k]) ++k;
      stop.fallback[j] = static_cast<uint32_t>(k);
    }
    stops_.push_back(std::move(stop));
  }
}

StopMatcher::Result StopMatcher::Push(std::string_view text) {
  Result result;
  if (stopped_) return result;
  const size_t begin = held_.size();
  held_.append(text);
  for (size_t i = begin; i < held_.size(); ++i) {
    const char c = held_[i];
    const Stop* done = nullptr;  // among the stops completing at byte i, the longest (earliest start)
    for (Stop& stop : stops_) {
      uint32_t k = stop.matched;
      while (k > 0 && stop.text[k] != c) k = stop.fallback[k - 1];
      if (stop.text[k] == c) ++k;
      stop.matched = k;
      if (k == stop.text.size() && (done == nullptr || k > done->text.size())) done = &stop;
    }
    if (done != nullptr) {
      // The occurrence started in held_: all but its last byte was a matched prefix kept there.
      result.emit = held_.substr(0, i + 1 - done->text.size());
      result.stopped = true;
      result.matched = done->text;
      held_.clear();
      stopped_ = true;
      return result;
    }
  }
  // Hold back the longest suffix that is a proper prefix of a stop string: a later occurrence can
  // only start there.
  size_t keep = 0;
  for (const Stop& stop : stops_) keep = std::max<size_t>(keep, stop.matched);
  const size_t cut = CharBoundaryAtOrBefore(held_, held_.size() - keep);
  result.emit = held_.substr(0, cut);
  held_.erase(0, cut);
  return result;
}

std::string StopMatcher::Flush() {
  std::string out = std::move(held_);
  held_.clear();
  for (Stop& stop : stops_) stop.matched = 0;
  return out;
}

}  // namespace infernix
