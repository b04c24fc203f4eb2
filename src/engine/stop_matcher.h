// Stop strings over streamed text: finds a stop string even when it spans many decoded pieces and
// never releases any part of it.
//
// The stream stops at the first stop occurrence to complete: the one that ends earliest in the text,
// and among those ending at the same byte the one that starts earliest (stops "ab" and "b" on "xab"
// cut after "x"). The concatenation of everything emitted (Push().emit, then Flush()) is the text up
// to, and excluding, that occurrence, or the whole text when none occurs, however the text was split.
// A suffix that could still grow into a stop string is held back until it cannot, or until Flush.
// Emitted text never ends inside a UTF-8 character. Each byte costs O(number of stops) (a
// Knuth-Morris-Pratt matcher per stop string). Not thread-safe; one per request.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace infernix {

class StopMatcher {
 public:
  static constexpr size_t kMaxStops = 16;

  // Empty strings are ignored. Errors (kInvalidArgument, naming "stop"): more than kMaxStops strings,
  // or a string that is not valid UTF-8.
  explicit StopMatcher(std::vector<std::string> stops);

  struct Result {
    std::string emit;      // text safe to release now
    bool stopped = false;  // a stop string completed; emit ends right before it
    std::string matched;   // that stop string
  };

  // Feeds the next decoded text (complete UTF-8 pieces). After a stop, returns an empty Result
  // (stopped = false) and ignores the text.
  Result Push(std::string_view text);

  // End of generation without a stop: releases the held-back text (empty after a stop).
  std::string Flush();

  bool stopped() const { return stopped_; }
  bool empty() const { return stops_.empty(); }

 private:
  struct Stop {
    std::string text;
    std::vector<uint32_t> fallback;  // KMP: longest proper border of text[0, i + 1)
    uint32_t matched = 0;            // the longest prefix of text that ends the stream so far
  };
  std::vector<Stop> stops_;
  std::string held_;  // the unreleased end of the stream: what some stop has matched so far
  bool stopped_ = false;
};

}  // namespace infernix
