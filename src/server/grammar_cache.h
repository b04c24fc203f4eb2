// The server's cache of compiled grammars (TokenGrammar: the grammar plus the per-stack masks that
// requests computed with it), keyed by the grammar's kind and source text, so a second request with
// the same schema or grammar reuses the mask work. Least recently used entries are evicted when the
// cache holds more than `max_entries` grammars or their masks more than `max_bytes` (the entry just
// used is never evicted, so one huge grammar still works). Evicted grammars stay alive while
// requests use them. Thread-safe.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "grammar/token_matcher.h"

namespace infernix {

class GrammarCache {
 public:
  static constexpr size_t kDefaultEntries = 64;
  static constexpr size_t kDefaultBytes = size_t{256} << 20;

  explicit GrammarCache(size_t max_entries = kDefaultEntries, size_t max_bytes = kDefaultBytes)
      : max_entries_(max_entries), max_bytes_(max_bytes) {}

  // The cached grammar (now the most recently used), or null.
  std::shared_ptr<grammar::TokenGrammar> Find(const std::string& key);
  // Stores `value` unless the key is present; returns the stored one. Evicts as needed.
  std::shared_ptr<grammar::TokenGrammar> Insert(const std::string& key, std::shared_ptr<grammar::TokenGrammar> value);
  size_t size() const;

 private:
  using Entry = std::pair<std::string, std::shared_ptr<grammar::TokenGrammar>>;
  void Evict();  // mutex_ held

  const size_t max_entries_, max_bytes_;
  mutable std::mutex mutex_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
};

}  // namespace infernix
